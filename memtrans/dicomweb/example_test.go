package dicomweb_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/radgen/radgen/memtrans/dicomweb"
)

// ExampleClient_SearchStudies finds the chest radiographs of a PACS by
// QIDO-RS. The PACS here is a stand-in answering one study.
func ExampleClient_SearchStudies() {
	pacs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Println(r.URL.Path, r.URL.Query().Get("ModalitiesInStudy"))
		w.Header().Set("Content-Type", "application/dicom+json")
		io.WriteString(w, `[{"0020000D":{"vr":"UI","Value":["1.2.826.0.1.3680043.8.498.1"]},
		                     "00100010":{"vr":"PN","Value":[{"Alphabetic":"Doe^Jane"}]}}]`)
	}))
	defer pacs.Close()

	client, err := dicomweb.New(pacs.URL+"/dicom-web", dicomweb.WithBearerToken("secret"))
	if err != nil {
		log.Fatal(err)
	}
	studies, err := client.SearchStudies(context.Background(), dicomweb.Query{Modalities: []string{"CR", "DX"}})
	if err != nil {
		log.Fatal(err)
	}
	for _, s := range studies {
		fmt.Println(s.String(dicomweb.TagStudyInstanceUID), s.String(0x00100010))
	}
	// Output:
	// /dicom-web/studies CR,DX
	// 1.2.826.0.1.3680043.8.498.1 Doe^Jane
}
