package fhir

import (
	"encoding/json"
	"errors"
)

// The types below hold the subset of FHIR R4 (4.0.1) that the package
// writes. Field names and JSON names follow the specification; empty fields
// are left out, as FHIR requires (an element is absent or has a value).

// ContainedResource is one resource a DiagnosticReport carries inside it
// (FHIR's contained resources, referenced as "#id"): exactly one field is
// set, and its JSON is that resource's.
type ContainedResource struct {
	Device      *Device
	Observation *Observation
}

// MarshalJSON writes the resource that is set.
func (c ContainedResource) MarshalJSON() ([]byte, error) {
	switch {
	case c.Device != nil && c.Observation == nil:
		return json.Marshal(c.Device)
	case c.Observation != nil && c.Device == nil:
		return json.Marshal(c.Observation)
	}
	return nil, errors.New("fhir: a contained resource holds exactly one resource")
}

// Coding is a code from a code system.
type Coding struct {
	System  string `json:"system,omitempty"`
	Code    string `json:"code,omitempty"`
	Display string `json:"display,omitempty"`
}

// CodeableConcept is a concept given by codes and/or text.
type CodeableConcept struct {
	Coding []Coding `json:"coding,omitempty"`
	Text   string   `json:"text,omitempty"`
}

// Identifier is a business identifier: a value in a namespace (System).
type Identifier struct {
	Type     *CodeableConcept `json:"type,omitempty"`
	System   string           `json:"system,omitempty"`
	Value    string           `json:"value,omitempty"`
	Assigner *Reference       `json:"assigner,omitempty"` // the organisation that issued it
}

// Reference points at another resource: literally (Reference, "#id" for a
// contained one), logically (Identifier) or both.
type Reference struct {
	Reference  string      `json:"reference,omitempty"`
	Type       string      `json:"type,omitempty"`
	Identifier *Identifier `json:"identifier,omitempty"`
	Display    string      `json:"display,omitempty"`
}

// Attachment is content in another format, here the report as text/plain;
// Data is base64.
type Attachment struct {
	ContentType string `json:"contentType,omitempty"`
	Language    string `json:"language,omitempty"`
	Data        string `json:"data,omitempty"`
	Title       string `json:"title,omitempty"`
	Creation    string `json:"creation,omitempty"`
}

// Annotation is a text note.
type Annotation struct {
	Text string `json:"text"`
}

// Meta is resource metadata; the package writes security labels.
type Meta struct {
	Security []Coding `json:"security,omitempty"`
}

// DeviceName is one of a Device's names; Type is a DeviceNameType code
// (here "model-name").
type DeviceName struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// DeviceVersion is a version of a Device.
type DeviceVersion struct {
	Type  *CodeableConcept `json:"type,omitempty"`
	Value string           `json:"value"`
}

// Device is the model that wrote a report.
type Device struct {
	ResourceType string           `json:"resourceType"` // "Device"
	ID           string           `json:"id,omitempty"`
	Meta         *Meta            `json:"meta,omitempty"`
	Identifier   []Identifier     `json:"identifier,omitempty"`
	Status       string           `json:"status,omitempty"`
	Manufacturer string           `json:"manufacturer,omitempty"`
	DeviceName   []DeviceName     `json:"deviceName,omitempty"`
	Type         *CodeableConcept `json:"type,omitempty"`
	Version      []DeviceVersion  `json:"version,omitempty"`
}

// Observation is one finding; the package writes the report text as a
// narrative observation made by the model (Device).
type Observation struct {
	ResourceType      string            `json:"resourceType"` // "Observation"
	ID                string            `json:"id,omitempty"`
	Meta              *Meta             `json:"meta,omitempty"`
	Status            string            `json:"status"`
	Category          []CodeableConcept `json:"category,omitempty"`
	Code              CodeableConcept   `json:"code"`
	Subject           *Reference        `json:"subject,omitempty"`
	EffectiveDateTime string            `json:"effectiveDateTime,omitempty"`
	Issued            string            `json:"issued,omitempty"`
	ValueString       string            `json:"valueString,omitempty"`
	Note              []Annotation      `json:"note,omitempty"`
	Device            *Reference        `json:"device,omitempty"`
}

// DiagnosticReport is an FHIR R4 DiagnosticReport. Build one with
// NewDiagnosticReport and write it with encoding/json; the fields may be
// changed in between (the package's tests check what NewDiagnosticReport
// builds against the R4 schema, not later changes).
type DiagnosticReport struct {
	ResourceType      string              `json:"resourceType"` // "DiagnosticReport"
	ID                string              `json:"id,omitempty"`
	Meta              *Meta               `json:"meta,omitempty"`
	Language          string              `json:"language,omitempty"`
	Contained         []ContainedResource `json:"contained,omitempty"`
	Identifier        []Identifier        `json:"identifier,omitempty"`
	BasedOn           []Reference         `json:"basedOn,omitempty"`
	Status            string              `json:"status"`
	Category          []CodeableConcept   `json:"category,omitempty"`
	Code              CodeableConcept     `json:"code"`
	Subject           *Reference          `json:"subject,omitempty"`
	EffectiveDateTime string              `json:"effectiveDateTime,omitempty"`
	Issued            string              `json:"issued,omitempty"`
	Result            []Reference         `json:"result,omitempty"`
	ImagingStudy      []Reference         `json:"imagingStudy,omitempty"`
	Conclusion        string              `json:"conclusion,omitempty"`
	PresentedForm     []Attachment        `json:"presentedForm,omitempty"`
}

// Device returns the contained model Device, or nil.
func (d *DiagnosticReport) Device() *Device {
	for _, r := range d.Contained {
		if r.Device != nil {
			return r.Device
		}
	}
	return nil
}
