// Package apicheck guards radgen's public API from the test suite: every
// exported identifier of a public package has a doc comment, every public
// package has a runnable Example, no exported signature names an internal
// or unexported type, memtrans stays within its export budget, and the
// exported API keeps the v1 promise (CONTRIBUTING.md): it stays compatible
// with every release of the module's major version.
//
// api/releases.txt at the module root lists the releases, oldest first,
// one line each: the version, its commit (a full hash, or "-" on the last
// line while a release is being prepared), and its record, api/VERSION.txt.
// A record lists one line per exported declaration of the public packages
// (every package outside internal/ and examples/): functions and methods
// with their signatures (parameter types, without parameter names, which no
// caller writes), each exported struct field and embedded field, each
// interface method, type definitions, constants and variables.
//
// TestAPICompatibility compares the current API with the record of every
// listed release of the module's major version (v1.0.0, v1.1.0, …; the v0
// records are history and are not compared). A line of a record missing
// from the API is an incompatible change — the name is gone, or changed:
// its signature or type differs — and fails the test with the name, as
// does a new method of an interface a record holds, which breaks its
// implementations. New names are compatible additions; they are recorded in
// the next minor version's record (api/v1.1.0.txt after v1.0.0), which holds
// the whole current API, and the test fails on a name that no record holds
// and on a record file that is neither listed nor the next minor's.
//
// To record additions, after reviewing them:
//
//	go test ./internal/apicheck -run API -update
//
// -update writes only the next minor version's record, and refuses an API
// that breaks a release. To record a release:
//
//	go test ./internal/apicheck -run API -release v1.1.0
//
// -release writes api/v1.1.0.txt and lists v1.1.0 with "-" for its commit,
// which is replaced by the release commit's hash once it exists. Until
// then the record may be written again with -release; once its commit is
// listed, it is released, and nothing rewrites it.
package apicheck
