// Package oracletest holds the tests whose oracles are maintained
// libraries outside radgen: the report page driven in headless Chromium
// through chromedp, and the FHIR reports validated against the R4 JSON
// schema by santhosh-tekuri/jsonschema. It is a module of its own, so that
// these libraries never enter the library's go.mod; .ci/run runs it.
//
//	cd internal/oracletest && go test .
package oracletest
