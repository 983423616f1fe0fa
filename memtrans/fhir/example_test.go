package fhir_test

import (
	"encoding/json"
	"fmt"
	"log"
	"time"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/fhir"
)

// ExampleNewDiagnosticReport writes a generated report (here a literal
// one; in use, an element of memtrans.Model.Generate's result) as a FHIR R4
// DiagnosticReport.
func ExampleNewDiagnosticReport() {
	rep := memtrans.Report{StudyID: "CXR1", Text: "the lungs are clear . no pneumothorax ."}
	dr, err := fhir.NewDiagnosticReport(rep,
		fhir.Study{InstanceUID: "1.2.826.0.1.3680043.8.498.1", AccessionNumber: "A42"},
		fhir.Model{Name: "radgen R2Gen", Version: "0.1.0", Checksum: "sha256:2c26b46b68ffc68ff99b453c1d30413413422d706483bfa0f98a5e886266e7ae"},
		time.Date(2026, 11, 24, 9, 30, 0, 0, time.UTC))
	if err != nil {
		log.Fatal(err)
	}
	b, err := json.Marshal(dr)
	if err != nil {
		log.Fatal(err)
	}
	var back struct {
		Status       string `json:"status"`
		Conclusion   string `json:"conclusion"`
		Issued       string `json:"issued"`
		ImagingStudy []struct {
			Identifier struct{ System, Value string } `json:"identifier"`
		} `json:"imagingStudy"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		log.Fatal(err)
	}
	fmt.Println(back.Status)
	fmt.Println(back.Conclusion)
	fmt.Println(back.Issued)
	fmt.Println(back.ImagingStudy[0].Identifier.System, back.ImagingStudy[0].Identifier.Value)
	fmt.Println(dr.Device().DeviceName[0].Name, dr.Device().Version[0].Value)
	// Output:
	// preliminary
	// the lungs are clear . no pneumothorax .
	// 2026-11-24T09:30:00Z
	// urn:dicom:uid urn:oid:1.2.826.0.1.3680043.8.498.1
	// radgen R2Gen 0.1.0
}
