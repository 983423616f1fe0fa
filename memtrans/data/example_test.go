package data_test

import (
	"context"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"path/filepath"

	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/vision"
)

// Build R2Gen's vocabulary from training reports, then encode and decode.
func ExampleTokenizer() {
	train := []string{
		"1. The heart is normal in size. 2. No pleural effusion.",
		"The heart is enlarged. No pleural effusion.",
		"The heart is normal. The lungs are clear.",
	}
	tok, err := data.BuildTokenizer(data.IUXray, 2, train) // R2Gen uses 3 for IU X-Ray
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(tok.Tokens())

	ids := tok.Encode(nil, "The heart is mildly enlarged.", data.IUXray.MaxSeqLen())
	fmt.Println(ids)
	fmt.Printf("%q\n", tok.Decode(ids[1:])) // without the bos

	b, _ := tok.MarshalJSON() // what a checkpoint stores
	fmt.Println(string(b))
	// Output:
	// [. <unk> effusion heart is no normal pleural the]
	// [0 9 4 5 2 2 1 0]
	// "the heart is <unk> <unk> ."
	// {"corpus":"iu_xray","threshold":2,"idx2token_from_1":[".","\u003cunk\u003e","effusion","heart","is","no","normal","pleural","the"]}
}

// R2Gen's IU X-Ray cleaner, quirks included: "1. " vanishes wherever it is,
// hyphens stay, and the doubled period leaves an empty sentence.
func ExampleCleanIUXray() {
	fmt.Println(data.CleanIUXray("1. Heart size 1. normal. 2. Mild T11-T12 spondylosis (XXXX).. . Lungs clear."))
	// Output:
	// heart size normal . mild t11-t12 spondylosis xxxx .  . lungs clear .
}

// The report and labels a synthetic study carries are written from its
// findings.
func ExampleFindings_Report() {
	f := data.Findings{CTR: 0.62, Effusion: data.Left, Device: data.Pacemaker}
	fmt.Println(f.Report())
	fmt.Println(data.CleanIUXray(f.Report()))
	for i, v := range f.Labels() {
		if v == 1 {
			fmt.Println(data.LabelNames[i])
		}
	}
	// Output:
	// The heart is enlarged. The mediastinum is unremarkable. A left chest wall pacemaker is in place. The lungs are clear. There is a small left pleural effusion. There is no pneumothorax. The osseous structures are intact.
	// the heart is enlarged . the mediastinum is unremarkable . a left chest wall pacemaker is in place . the lungs are clear . there is a small left pleural effusion . there is no pneumothorax . the osseous structures are intact .
	// Cardiomegaly
	// Pleural Effusion
	// Support Devices
}

// Write a small synthetic IU X-Ray style data set and read it back with the
// loaders used for the real one.
func ExampleWriteSynthetic() {
	dir, err := os.MkdirTemp("", "synth")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	cfg := data.SynthConfig{Train: 30, Val: 5, Test: 5, Width: 64, Height: 64, Seed: 1}
	if _, err := data.WriteSynthetic(ctx, dir, cfg); err != nil {
		log.Fatal(err)
	}

	ann, err := data.LoadAnnotation(filepath.Join(dir, "annotation.json"))
	if err != nil {
		log.Fatal(err)
	}
	reports, _ := ann.Reports("train")
	tok, _ := data.BuildTokenizer(data.IUXray, data.IUXray.Threshold(), reports)
	ds, err := data.NewDataset(ann, "train", tok, data.DatasetConfig{ImageDir: filepath.Join(dir, "images")})
	if err != nil {
		log.Fatal(err)
	}
	loader, err := data.NewLoader(ds, data.WithBatchSize(8), data.WithSeed(1),
		data.WithTransform(vision64()))
	if err != nil {
		log.Fatal(err)
	}
	for b, err := range loader.Epoch(ctx, 0) {
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("images (%d, %d, 3, %d, %d), targets (%d, %d)\n", b.Size(), b.Views, b.Height, b.Width, b.Size(), b.SeqLen)
		break
	}
	fmt.Println(ds.Len(), "training studies,", tok.Len(), "words")
	// Output:
	// images (8, 2, 3, 56, 56), targets (8, 48)
	// 30 training studies, 33 words
}

// Render one film directly.
func ExampleRenderFilm() {
	f := data.Findings{CTR: 0.44, Pneumothorax: data.Right}
	img := data.RenderFilm(f, data.Frontal, 96, 96, rand.New(rand.NewPCG(1, 2)))
	fmt.Println(img.Bounds().Dx(), img.Bounds().Dy(), f.Labels()[data.LabelPneumothorax])
	// Output:
	// 96 96 1
}

// vision64 is R2Gen's training transform scaled to 64-pixel films:
// Resize(64) on the shorter side, RandomCrop(56), flip.
func vision64() vision.Transform { return vision.TrainTransform(64, 56) }

// R2Gen scores generated text against references cleaned and passed
// through the tokenizer of the train split: words it does not know read
// <unk>.
func ExampleAnnotation_ReferenceFunc() {
	var train []data.Study
	for range 3 {
		train = append(train, data.Study{ID: "s", Report: "The heart is normal. No pleural effusion."})
	}
	ann := data.NewAnnotation(map[string][]data.Study{"train": train})
	for _, mode := range []string{"as-is", "clean", "r2gen"} {
		ref, err := ann.ReferenceFunc(mode, data.IUXray)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %q\n", mode, ref("The heart is enlarged. No effusion."))
	}
	// Output:
	// as-is: "The heart is enlarged. No effusion."
	// clean: "the heart is enlarged . no effusion ."
	// r2gen: "the heart is <unk> . no effusion ."
}
