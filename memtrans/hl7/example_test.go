package hl7_test

import (
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/hl7"
	"github.com/radgen/radgen/vision"
)

// ExampleNewORU writes a generated report as an ORU^R01 for the RIS. In
// use the source is Study.DICOM, as memtrans.StudiesFromDICOMDir fills it.
func ExampleNewORU() {
	pa := &vision.DICOMInfo{
		StudyInstanceUID: "1.2.826.0.1.3680043.8.498.1", SeriesInstanceUID: "1.2.826.0.1.3680043.8.498.1.1",
		SOPClassUID: "1.2.840.10008.5.1.4.1.1.1.1", SOPInstanceUID: "1.2.826.0.1.3680043.8.498.1.1.1",
		PatientID: "PID-7", PatientName: "Doe^Jane", AccessionNumber: "A42",
	}
	src := &vision.DICOMStudy{StudyInstanceUID: pa.StudyInstanceUID, Views: []vision.DICOMView{{Path: "pa.dcm", Kind: vision.ViewFrontal, Info: pa}}}
	msg, err := hl7.NewORU(memtrans.Report{Text: "the lungs are clear ."}, src, hl7.Model{Name: "radgen R2Gen", Version: "0.1.0"},
		time.Date(2026, 11, 24, 9, 30, 0, 0, time.UTC), hl7.WithControlID("MSG1"))
	if err != nil {
		log.Fatal(err)
	}
	for _, seg := range strings.Split(strings.TrimSpace(string(msg)), "\r") {
		fmt.Println(seg)
	}
	// Output:
	// MSH|^~\&|RADGEN||||20261124093000+0000||ORU^R01^ORU_R01|MSG1|P|2.5.1
	// PID|1||PID-7||Doe^Jane
	// ORC|RE||A42
	// OBR|1||A42|18748-4^Diagnostic Imaging Report^LN||||||||||||||A42||||20261124093000+0000||RAD|P
	// ZDS|1.2.826.0.1.3680043.8.498.1^RADGEN^Application^DICOM
	// OBX|1|TX|18782-3^Radiology Study observation (narrative)^LN|1|the lungs are clear .||||||P|||20261124093000+0000|radgen R2Gen^radgen R2Gen 0.1.0^99RADGEN|||radgen R2Gen
	// OBX|2|ST|110180^Study Instance UID^DCM|2|1.2.826.0.1.3680043.8.498.1||||||P|||20261124093000+0000|radgen R2Gen^radgen R2Gen 0.1.0^99RADGEN|||radgen R2Gen
}
