package vision_test

import (
	"fmt"
	"log"
	"os"

	"github.com/radgen/radgen/vision"
)

// ExampleDecodeDICOM renders a chest radiograph stored as DICOM — 4.dcm from
// github.com/suyashkumar/dicom's testdata, a MONOCHROME1 CR film — and
// turns it into the model's input. It reads a file outside this repository,
// so it is compiled but not run.
func ExampleDecodeDICOM() {
	f, err := os.Open("4.dcm")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		log.Fatal(err)
	}
	// Refuse anything over 16 Mi pixels before reading its pixel data.
	px, err := vision.DecodeDICOM(f, st.Size(), vision.WithMaxPixels(16<<20))
	if err != nil {
		log.Fatal(err)
	}
	img, err := vision.TestTransform(224).Apply(nil, px, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(px.W, px.H, px.C, "→", img.C, img.H, img.W)
}

// ExampleDecodeDICOMFrame reads the stored values of a JPEG-LS
// near-lossless file (NEAR = 3) and of the uncompressed image it was encoded
// from, and reports how far apart they are: at most NEAR, as the codec
// promises.
func ExampleDecodeDICOMFrame() {
	coded, err := vision.DecodeDICOMFrameFile("testdata/dicom/jls_near3_mono8.dcm")
	if err != nil {
		log.Fatal(err)
	}
	source, err := vision.DecodeDICOMFrameFile("testdata/dicom/mono8.dcm")
	if err != nil {
		log.Fatal(err)
	}
	var maxDiff int64
	for i := range coded.Len() {
		maxDiff = max(maxDiff, coded.Value(i)-source.Value(i), source.Value(i)-coded.Value(i))
	}
	fmt.Println(coded.TransferSyntax, coded.Columns, coded.Rows, coded.BitsStored, coded.Photometric)
	fmt.Println("max |Δ|:", maxDiff)
	// Output:
	// 1.2.840.10008.1.2.4.81 64 48 8 MONOCHROME2
	// max |Δ|: 3
}
