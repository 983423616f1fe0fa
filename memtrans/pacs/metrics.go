package pacs

import (
	"fmt"
	"io"
	"net/http"
)

// WriteMetrics writes the worker's counts in Prometheus's text format
// (version 0.0.4):
//
//	radgen_pacs_polls_total                      searches of the PACS that completed
//	radgen_pacs_studies_total{outcome}           reported, already_reported, dead_letter
//	radgen_pacs_outages_total                    searches or studies cut short by an unreachable PACS or receiver
//	radgen_pacs_waiting_studies                  studies found and not done: settling, waiting to be retried, held back
//	radgen_pacs_study_seconds_sum, _count        time to report on a study, from search to stored SR
//	radgen_pacs_retries_total                    failures of one study or HL7 message that may pass, retried later
//	radgen_pacs_anomalies_total{kind}            duplicate_uid, unsettled, invalid_uid, short_page, search_cut
//	radgen_pacs_hl7_sent_total                   ORU^R01 messages acknowledged
//	radgen_pacs_hl7_pending                      ORU^R01 messages journalled, not yet acknowledged
func (w *Worker) WriteMetrics(out io.Writer) error {
	s := w.Stats()
	_, err := fmt.Fprintf(out, `# HELP radgen_pacs_polls_total Searches of the PACS that completed.
# TYPE radgen_pacs_polls_total counter
radgen_pacs_polls_total %d
# HELP radgen_pacs_studies_total Studies by outcome.
# TYPE radgen_pacs_studies_total counter
radgen_pacs_studies_total{outcome="reported"} %d
radgen_pacs_studies_total{outcome="already_reported"} %d
radgen_pacs_studies_total{outcome="dead_letter"} %d
# HELP radgen_pacs_outages_total Searches or studies cut short by an unreachable PACS or HL7 receiver.
# TYPE radgen_pacs_outages_total counter
radgen_pacs_outages_total %d
# HELP radgen_pacs_waiting_studies Studies found at the last search and not done: settling, waiting to be retried, or held back.
# TYPE radgen_pacs_waiting_studies gauge
radgen_pacs_waiting_studies %d
# HELP radgen_pacs_study_seconds Time to report on a study, from its search to its stored SR.
# TYPE radgen_pacs_study_seconds summary
radgen_pacs_study_seconds_sum %g
radgen_pacs_study_seconds_count %d
# HELP radgen_pacs_retries_total Failures of one study or HL7 message that may pass, retried later.
# TYPE radgen_pacs_retries_total counter
radgen_pacs_retries_total %d
# HELP radgen_pacs_anomalies_total What the PACS listed that the worker rode out, by kind.
# TYPE radgen_pacs_anomalies_total counter
radgen_pacs_anomalies_total{kind="duplicate_uid"} %d
radgen_pacs_anomalies_total{kind="unsettled"} %d
radgen_pacs_anomalies_total{kind="invalid_uid"} %d
radgen_pacs_anomalies_total{kind="short_page"} %d
radgen_pacs_anomalies_total{kind="search_cut"} %d
# HELP radgen_pacs_hl7_sent_total ORU^R01 messages acknowledged by the receiver.
# TYPE radgen_pacs_hl7_sent_total counter
radgen_pacs_hl7_sent_total %d
# HELP radgen_pacs_hl7_pending ORU^R01 messages journalled whose acknowledgement has not come.
# TYPE radgen_pacs_hl7_pending gauge
radgen_pacs_hl7_pending %d
`, s.Polls, s.Reported, s.AlreadyReported, s.DeadLetters, s.Outages, s.Waiting, s.StudySeconds, s.Reported,
		s.Retries, s.Duplicates, s.Unsettled, s.InvalidUIDs, s.ShortPages, s.SearchesCut, s.HL7Sent, s.HL7Pending)
	return err
}

// MetricsHandler serves WriteMetrics (mount it at /metrics).
func (w *Worker) MetricsHandler() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		rw.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		w.WriteMetrics(rw)
	})
}
