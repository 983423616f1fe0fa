package jpeg2000

import "errors"

func errorsIs(err, target error) bool { return errors.Is(err, target) }
