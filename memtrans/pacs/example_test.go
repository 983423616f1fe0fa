package pacs_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"

	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/data"
	"github.com/radgen/radgen/memtrans/dicomsr"
	"github.com/radgen/radgen/memtrans/dicomweb"
	"github.com/radgen/radgen/memtrans/pacs"
)

// ExampleWorker reports on what a PACS holds and stops. In use the client
// names the hospital's archive (Orthanc: http://host:8042/dicom-web) and
// the model is a trained checkpoint (memtrans.LoadFile); here a stand-in
// PACS holds no study yet and the model is tiny and untrained.
func ExampleWorker() {
	archive := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/dicom+json")
		io.WriteString(w, "[]") // QIDO-RS: no CR or DX study
	}))
	defer archive.Close()
	client, err := dicomweb.New(archive.URL+"/dicom-web", dicomweb.WithBasicAuth("radgen", "secret"))
	if err != nil {
		log.Fatal(err)
	}
	tok, _ := data.BuildTokenizer(data.IUXray, 1, []string{"The lungs are clear."})
	model, err := memtrans.New(memtrans.R2GenTiny(tok.Len()+1), tok, 1)
	if err != nil {
		log.Fatal(err)
	}
	defer model.Close()

	w, err := pacs.New(pacs.Config{
		PACS:      client,
		Model:     model,
		ModelInfo: dicomsr.Model{Name: "radgen R2Gen", Version: "0.1.0", Checksum: "sha256:9f86d081"},
		// MLLP: &hl7.Sender{Addr: "ris.example:2575"} and JournalFile: "hl7-journal.jsonl"
		// would send each report to the RIS too.
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := w.RunOnce(context.Background()); err != nil { // Run(ctx) keeps watching
		log.Fatal(err)
	}
	st := w.Stats()
	fmt.Println("searches:", st.Polls, "reported:", st.Reported, "dead letters:", st.DeadLetters)
	w.WriteMetrics(os.Stdout)
	// Output:
	// searches: 1 reported: 0 dead letters: 0
	// # HELP radgen_pacs_polls_total Searches of the PACS that completed.
	// # TYPE radgen_pacs_polls_total counter
	// radgen_pacs_polls_total 1
	// # HELP radgen_pacs_studies_total Studies by outcome.
	// # TYPE radgen_pacs_studies_total counter
	// radgen_pacs_studies_total{outcome="reported"} 0
	// radgen_pacs_studies_total{outcome="already_reported"} 0
	// radgen_pacs_studies_total{outcome="dead_letter"} 0
	// # HELP radgen_pacs_outages_total Searches or studies cut short by an unreachable PACS or HL7 receiver.
	// # TYPE radgen_pacs_outages_total counter
	// radgen_pacs_outages_total 0
	// # HELP radgen_pacs_waiting_studies Studies found at the last search and not done: settling, waiting to be retried, or held back.
	// # TYPE radgen_pacs_waiting_studies gauge
	// radgen_pacs_waiting_studies 0
	// # HELP radgen_pacs_study_seconds Time to report on a study, from its search to its stored SR.
	// # TYPE radgen_pacs_study_seconds summary
	// radgen_pacs_study_seconds_sum 0
	// radgen_pacs_study_seconds_count 0
	// # HELP radgen_pacs_retries_total Failures of one study or HL7 message that may pass, retried later.
	// # TYPE radgen_pacs_retries_total counter
	// radgen_pacs_retries_total 0
	// # HELP radgen_pacs_anomalies_total What the PACS listed that the worker rode out, by kind.
	// # TYPE radgen_pacs_anomalies_total counter
	// radgen_pacs_anomalies_total{kind="duplicate_uid"} 0
	// radgen_pacs_anomalies_total{kind="unsettled"} 0
	// radgen_pacs_anomalies_total{kind="invalid_uid"} 0
	// radgen_pacs_anomalies_total{kind="short_page"} 0
	// radgen_pacs_anomalies_total{kind="search_cut"} 0
	// # HELP radgen_pacs_hl7_sent_total ORU^R01 messages acknowledged by the receiver.
	// # TYPE radgen_pacs_hl7_sent_total counter
	// radgen_pacs_hl7_sent_total 0
	// # HELP radgen_pacs_hl7_pending ORU^R01 messages journalled whose acknowledgement has not come.
	// # TYPE radgen_pacs_hl7_pending gauge
	// radgen_pacs_hl7_pending 0
}
