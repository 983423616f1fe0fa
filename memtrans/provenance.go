package memtrans

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Provenance says what a model was trained on. A checkpoint records it
// (metadata key "radgen.provenance") so that whoever serves the model can
// say so beside its reports: a model trained on synthetic films writes
// fluent reports about real ones that mean nothing. The zero value means
// unknown (checkpoints written before it was recorded, and R2Gen weights).
type Provenance struct {
	// Data describes the training data, e.g. "IU X-Ray (R2Gen's split)"
	// or "synthetic chest films (memtrans/data.GenerateStudy)".
	Data string `json:"data,omitempty"`
	// Synthetic is set when the training films were synthetic, not
	// radiographs of patients.
	Synthetic bool `json:"synthetic,omitempty"`
}

// metaProvenance is the checkpoint metadata key of a model's Provenance.
const metaProvenance = "radgen.provenance"

// maxProvenanceData bounds Provenance.Data.
const maxProvenanceData = 1 << 10

// WithProvenance records what the model is trained on; Save and the
// Trainer's checkpoints write it, and Load reads it back (see
// Model.Provenance).
func WithProvenance(p Provenance) Option {
	return func(m *Model) error {
		if len(p.Data) > maxProvenanceData || !utf8.ValidString(p.Data) {
			return fmt.Errorf("memtrans: provenance: at most %d bytes of UTF-8", maxProvenanceData)
		}
		setProvenance(m, p)
		return nil
	}
}

// Provenance returns what the model was trained on, as WithProvenance set
// it or its checkpoint recorded it; the zero Provenance when unknown.
func (m *Model) Provenance() Provenance { return m.provenance }

// setProvenance records p on m, before m is shared.
func setProvenance(m *Model, p Provenance) { m.provenance = p }

// addProvenance adds m's provenance, when known, to a checkpoint's
// metadata.
func addProvenance(md map[string]string, m *Model) {
	if p := m.Provenance(); p != (Provenance{}) {
		b, _ := json.Marshal(p) // a string and a bool always marshal
		md[metaProvenance] = string(b)
	}
}

// setProvenanceMeta reads a checkpoint's provenance metadata into m; an
// absent or malformed value leaves it unknown.
func setProvenanceMeta(m *Model, v string) {
	var p Provenance
	if v == "" || len(v) > 4*maxProvenanceData || json.Unmarshal([]byte(v), &p) != nil || !utf8.ValidString(p.Data) {
		return
	}
	if len(p.Data) > maxProvenanceData {
		p.Data = strings.ToValidUTF8(p.Data[:maxProvenanceData], "")
	}
	setProvenance(m, p)
}
