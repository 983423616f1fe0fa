//go:build !unix

package atomicfile

import "sync"

// Without advisory locks, saves within one process are serialised.
var mu sync.Mutex

func lock(string) (func(), error) {
	mu.Lock()
	return mu.Unlock, nil
}
