package arch

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
)

var (
	registryMu sync.RWMutex
	byName     = map[string]registration{}
	byType     = map[reflect.Type]string{}
)

type registration struct {
	typ    reflect.Type
	decode func(json.RawMessage) (Config, error)
}

// ErrUnregistered is wrapped by the error for an architecture, or a
// configuration type, that no package has registered.
var ErrUnregistered = errors.New("arch: unregistered architecture")

// Register makes the configuration type T available to checkpoints under
// name: a checkpoint records the name and the configuration's JSON, and
// loading it decodes the JSON into a T (unknown fields are an error). Call
// it from an init function, as image formats and database/sql drivers
// register:
//
//	func init() { arch.Register[MyConfig]("my-variant") }
//
// It panics when name is empty, or when name or T is registered twice
// (programmer errors).
func Register[T Config](name string) {
	typ := reflect.TypeFor[T]()
	if name == "" {
		panic("arch: Register with an empty name")
	}
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := byName[name]; dup {
		panic(fmt.Sprintf("arch: architecture %q registered twice", name))
	}
	if prev, dup := byType[typ]; dup {
		panic(fmt.Sprintf("arch: %v registered as %q and %q", typ, prev, name))
	}
	byName[name] = registration{typ: typ, decode: func(raw json.RawMessage) (Config, error) {
		var c T
		if err := strictUnmarshal(raw, &c); err != nil {
			return nil, err
		}
		return c, nil
	}}
	byType[typ] = name
}

// Registered returns the registered architectures' names, sorted.
func Registered() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Name returns the name c's type is registered under. An unregistered type
// gives an error wrapping ErrUnregistered.
func Name(c Config) (string, error) {
	if c == nil {
		return "", fmt.Errorf("%w: nil configuration", ErrUnregistered)
	}
	registryMu.RLock()
	name, ok := byType[reflect.TypeOf(c)]
	registryMu.RUnlock()
	if !ok {
		return "", fmt.Errorf("%w: configuration type %T (call arch.Register[%T](name) in an init function)", ErrUnregistered, c, c)
	}
	return name, nil
}

// Decode returns the configuration of architecture name saved as the JSON
// config. An unregistered name gives an error wrapping ErrUnregistered that
// lists the registered ones.
func Decode(name string, config json.RawMessage) (Config, error) {
	registryMu.RLock()
	r, ok := byName[name]
	registryMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("%w %q (registered: %q): import the package that registers it", ErrUnregistered, name, Registered())
	}
	c, err := r.decode(config)
	if err != nil {
		return nil, fmt.Errorf("arch: %s configuration: %w", name, err)
	}
	return c, nil
}
