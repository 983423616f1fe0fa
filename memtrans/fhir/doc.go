// Package fhir writes a generated report as an HL7 FHIR R4 DiagnosticReport,
// the resource through which hospital systems take in diagnostic results.
//
// [NewDiagnosticReport] builds the resource from a [memtrans.Report], the
// imaging study it describes ([Study]) and the model that wrote it
// ([Model]); encoding/json writes it:
//
//	dr, err := fhir.NewDiagnosticReport(rep, fhir.Study{InstanceUID: uid}, fhir.Model{Name: "radgen R2Gen", Version: "1", Checksum: sum}, time.Now())
//	...
//	b, err := json.Marshal(dr)
//
// # What the resource says
//
//   - status is "preliminary": a generated report awaits a radiologist.
//   - code is LOINC 18748-4 "Diagnostic imaging study", the document-level
//     code for an imaging report. It names the kind of report whatever the
//     views a model used; a procedure code such as "XR Chest 2 Views" belongs
//     to the order and the ImagingStudy, and would be wrong for a one-view
//     study. category is HL7 v2 table 0074 "RAD" (radiology).
//   - conclusion holds the findings text, and presentedForm the same text
//     as a text/plain attachment (UTF-8, base64) with its language.
//   - imagingStudy is a logical reference to the study: its
//     StudyInstanceUID as an Identifier with system "urn:dicom:uid" and value
//     "urn:oid:<uid>", as the ImagingStudy resource identifies it, plus the
//     caller's literal reference ("ImagingStudy/…") when it has one. An
//     accession number becomes basedOn: the order, identified with type
//     v2-0203 "ACSN".
//   - The model is a contained Device: deviceName (type model-name), the
//     checksum of its weights as an identifier, and as versions the
//     model's (type text "model"), when it has one, then the software's
//     that wrote the report (type text "radgen", value radgen.Version). R4 restricts
//     DiagnosticReport.performer to people and organisations, so the
//     Device is linked where R4 allows it: the report's result is a
//     contained Observation (LOINC 18782-3 "Radiology Study observation
//     (narrative)", the findings) whose device is the model. Both resources
//     carry the security label AIAST ("artificial intelligence asserted",
//     HL7 v3 ObservationValue) in meta.security, and the Observation a note
//     saying that a model wrote it and that it is preliminary.
//   - effectiveDateTime is the study's time when given, otherwise the
//     issue time; issued is the time the caller gives.
//
// The package writes R4 JSON only; it does not read FHIR. Its tests check
// every resource it writes against the FHIR R4 JSON schema.
package fhir
