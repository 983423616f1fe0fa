package serve_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image/png"
	"mime/multipart"
	"net/http"
	"net/http/httptest"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/serve"
)

// A service mounts the handler under a prefix of its own mux, warms the
// model up, and clients post a study's views as multipart/form-data.
func Example() {
	// A tiny untrained model over a synthetic study (a real service loads
	// one with memtrans.LoadFile).
	cfg := data.SynthConfig{Train: 1, Width: 64, Height: 64, Seed: 1}
	st, err := data.GenerateStudy(cfg, "train", 0)
	if err != nil {
		panic(err)
	}
	tok, err := data.BuildTokenizer(data.IUXray, 1, []string{st.Study.Report})
	if err != nil {
		panic(err)
	}
	mc := memtrans.R2GenTiny(tok.Len() + 1)
	mc.ImageSize, mc.ResizeTo = 64, 64
	model, err := memtrans.New(mc, tok, 1)
	if err != nil {
		panic(err)
	}
	defer model.Close()

	h, err := serve.New(model, serve.WithQueue(32), serve.WithMaxUploadBytes(16<<20))
	if err != nil {
		panic(err)
	}
	defer h.Close()
	if err := h.WarmUp(context.Background()); err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/radgen/", http.StripPrefix("/radgen", h))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	// The client: one file per view, in the model's order, and options.
	var body bytes.Buffer
	w := multipart.NewWriter(&body)
	for v, film := range st.Films {
		f, _ := w.CreateFormFile("view", fmt.Sprintf("%d.png", v))
		png.Encode(f, film)
	}
	w.WriteField("beam_size", "2")
	w.WriteField("max_length", "8")
	w.Close()
	resp, err := http.Post(srv.URL+"/radgen/v1/reports", w.FormDataContentType(), &body)
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	var rep struct {
		Text   string `json:"text"`
		Tokens []int  `json:"tokens"`
		Model  struct {
			Checksum string `json:"checksum"`
		} `json:"model"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&rep); err != nil {
		panic(err)
	}
	fmt.Println(resp.Status, len(rep.Tokens) <= 8, rep.Model.Checksum == h.Info().Checksum)
	// Output: 200 OK true true
}
