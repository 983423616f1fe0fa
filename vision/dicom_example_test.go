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
