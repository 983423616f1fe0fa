// Package apicheck guards radgen's public API from the test suite: every
// exported identifier of a public package has a doc comment, every public
// package has a runnable Example, and the exported API stays compatible with
// the recorded release (api/v0.3.0.txt at the module root).
//
// The record lists one line per exported declaration: functions and methods
// with their signatures, each exported struct field, each interface method,
// type definitions, constants and variables. A line of the record that is
// missing from the current API is an incompatible change (a removal or a
// changed signature) and fails the test; new lines are compatible additions,
// except new methods of an exported interface, which break implementers and
// also fail.
//
// To accept an intended change, review the diff and rewrite the record:
//
//	go test ./internal/apicheck -run API -update
package apicheck
