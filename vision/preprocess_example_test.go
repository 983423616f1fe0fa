package vision_test

import (
	"bytes"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"log"
	"math/rand/v2"

	"github.com/radgen/radgen/vision"
)

// Decode a gray PNG and run R2Gen's test and training transforms on it.
func ExampleTransform_Apply() {
	film := image.NewGray(image.Rect(0, 0, 300, 250))
	for i := range film.Pix {
		film.Pix[i] = uint8(i % 251)
	}
	film.SetGray(0, 0, color.Gray{Y: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, film); err != nil {
		log.Fatal(err)
	}

	px, err := vision.Decode(&buf, vision.WithMaxPixels(1<<20))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("decoded %d×%d, %d channel(s)\n", px.W, px.H, px.C)

	test, err := vision.TestTransform(224).Apply(nil, px, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%v: (%d, %d, %d)\n", vision.TestTransform(224), test.C, test.H, test.W)

	rng := rand.New(rand.NewPCG(1, 2)) // seeded: the same crops and flips every run
	train, err := vision.TrainTransform(256, 224).Apply(nil, px, rng)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("%v: (%d, %d, %d)\n", vision.TrainTransform(256, 224), train.C, train.H, train.W)
	// Output:
	// decoded 300×250, 1 channel(s)
	// Resize((224,224))+Normalize: (3, 224, 224)
	// Resize(256)+RandomCrop(224)+Flip(0.5)+Normalize: (3, 224, 224)
}
