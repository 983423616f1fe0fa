package dicomsr_test

import (
	"bytes"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/dicomsr"
	"github.com/radgen/radgen/vision"
)

// ExampleNew writes a generated report as a Basic Text SR about the study
// it was generated from. In use the source is Study.DICOM, as
// memtrans.StudiesFromDICOMDir fills it; here it is written out.
func ExampleNew() {
	pa := &vision.DICOMInfo{
		StudyInstanceUID: "1.2.826.0.1.3680043.8.498.1", SeriesInstanceUID: "1.2.826.0.1.3680043.8.498.1.1",
		SOPClassUID: "1.2.840.10008.5.1.4.1.1.1.1", SOPInstanceUID: "1.2.826.0.1.3680043.8.498.1.1.1",
		PatientID: "PID-7", PatientName: "Doe^Jane", AccessionNumber: "A42", ViewPosition: "PA",
	}
	src := &vision.DICOMStudy{StudyInstanceUID: pa.StudyInstanceUID, Views: []vision.DICOMView{{Path: "pa.dcm", Kind: vision.ViewFrontal, Info: pa}}}
	rep := memtrans.Report{StudyID: pa.StudyInstanceUID, Text: "the lungs are clear . no pneumothorax ."}
	doc, err := dicomsr.New(rep, src, dicomsr.Model{Name: "radgen R2Gen", Version: "0.1.0"}, time.Date(2026, 11, 24, 9, 30, 0, 0, time.UTC))
	if err != nil {
		log.Fatal(err)
	}
	var file bytes.Buffer
	if _, err := doc.WriteTo(&file); err != nil {
		log.Fatal(err)
	}
	info, err := vision.ReadDICOMInfo(&file, int64(file.Len()))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.Modality, info.SOPClassUID == dicomsr.BasicTextSRStorage)
	fmt.Println(info.StudyInstanceUID, info.PatientID, info.AccessionNumber)
	fmt.Println(strings.HasPrefix(doc.SOPInstanceUID, "2.25."), info.SOPInstanceUID == doc.SOPInstanceUID)
	// Output:
	// SR true
	// 1.2.826.0.1.3680043.8.498.1 PID-7 A42
	// true true
}
