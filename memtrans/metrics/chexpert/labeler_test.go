package chexpert

import (
	"testing"
)

// Short names for the expectations below.
const (
	NF  = NoFinding
	EC  = EnlargedCardiomediastinum
	CM  = Cardiomegaly
	LL  = LungLesion
	LO  = LungOpacity
	ED  = Edema
	CO  = Consolidation
	PN  = Pneumonia
	AT  = Atelectasis
	PTX = Pneumothorax
	PE  = PleuralEffusion
	PO  = PleuralOther
	FR  = Fracture
	SD  = SupportDevices

	pos = Positive
	neg = Negative
	unc = Uncertain
)

type want map[Observation]Label

// labelCases are hand-written report sentences with the labels the CheXpert
// labeler's rules give them. Every observation not listed must be blank.
var labelCases = []struct {
	report string
	want   want
}{
	// Negation.
	{"No pleural effusion.", want{PE: neg, NF: pos}},
	{"There is no pleural effusion or pneumothorax.", want{PE: neg, PTX: neg, NF: pos}},
	{"No focal consolidation, pleural effusion, or pneumothorax.", want{CO: neg, PE: neg, PTX: neg, NF: pos}},
	{"the lungs are clear without focal airspace disease pleural effusion or pneumothorax .", want{LO: neg, PE: neg, PTX: neg, NF: pos}},
	{"There is no evidence of pneumothorax.", want{PTX: neg, NF: pos}},
	{"No displaced rib fracture.", want{FR: neg, NF: pos}},
	{"No pulmonary edema.", want{ED: neg, NF: pos}},
	{"No definite pneumothorax.", want{PTX: neg, NF: pos}},
	{"No focal airspace consolidation.", want{CO: neg, NF: pos}},
	{"Negative for pneumonia.", want{PN: neg, NF: pos}},
	{"Free of pleural effusion.", want{PE: neg, NF: pos}},
	{"The heart is not enlarged.", want{CM: neg, NF: pos}},
	{"Pneumothorax is no longer seen.", want{PTX: neg, NF: pos}},
	{"Pleural effusion is not identified.", want{PE: neg, NF: pos}},
	// Resolution, removal, history.
	{"Pneumothorax has resolved.", want{PTX: neg, NF: pos}},
	{"Pleural effusions have resolved.", want{PE: neg, NF: pos}},
	{"Interval resolution of the left pleural effusion.", want{PE: neg, NF: pos}},
	{"Interval removal of the chest tube.", want{SD: neg, NF: pos}},
	{"History of pneumonia.", want{PN: neg, NF: pos}},
	// Unmention by normal/unremarkable/within normal limits.
	{"Heart size is normal.", want{CM: neg, NF: pos}},
	{"The heart is normal in size.", want{CM: neg, NF: pos}},
	{"The cardiomediastinal silhouette is within normal limits.", want{EC: neg, NF: pos}},
	{"Normal heart size and mediastinal contours.", want{CM: neg, EC: neg, NF: pos}},
	{"The heart size and mediastinal contours are within normal limits.", want{CM: neg, EC: neg, NF: pos}},
	{"Mediastinal contours are normal.", want{EC: neg, NF: pos}},
	{"the mediastinum is unremarkable .", want{EC: neg, NF: pos}},
	{"Heart size is upper limits of normal.", want{CM: neg, NF: pos}},
	{"the heart is normal in size . the mediastinum is unremarkable . the lungs are clear .", want{CM: neg, EC: neg, NF: pos}},
	// Uncertainty.
	{"Findings may represent atelectasis.", want{AT: unc}},
	{"Bibasilar opacities may represent atelectasis or pneumonia.", want{LO: unc, AT: unc, PN: unc}},
	{"Possible small right pleural effusion.", want{PE: unc}},
	{"Cannot exclude pneumonia.", want{PN: unc}},
	{"Pneumonia cannot be excluded.", want{PN: unc}},
	{"No new consolidation.", want{CO: unc}},
	{"Atelectasis versus consolidation.", want{AT: unc, CO: unc}},
	{"Atelectasis and/or scarring in the left base.", want{AT: unc, LO: unc}},
	{"Questionable left lower lobe infiltrate.", want{LO: unc}},
	{"An infiltrate is suspected.", want{LO: unc}},
	{"Left lower lobe consolidation concerning for pneumonia.", want{CO: pos, PN: unc}},
	{"Pulmonary vascular congestion.", want{ED: unc}},
	{"Borderline heart size.", want{CM: unc}},
	{"Heart size is stable.", want{CM: unc}},
	{"Stable cardiomediastinal silhouette.", want{EC: unc}},
	{"Cardiomediastinal silhouette is unchanged.", want{EC: unc}},
	// Positive.
	{"Mild cardiomegaly.", want{CM: pos}},
	{"The heart is mildly enlarged.", want{CM: pos}},
	{"The cardiac silhouette is enlarged.", want{CM: pos}},
	{"Stable cardiomegaly.", want{CM: pos}},
	{"Left basilar atelectasis.", want{AT: pos}},
	{"Collapse of the right upper lobe.", want{AT: pos}},
	{"Bilateral pleural effusions are present.", want{PE: pos}},
	{"Small left pleural effusion is unchanged.", want{PE: pos}},
	{"Right lower lobe pneumonia.", want{PN: pos}},
	{"Mild pulmonary edema.", want{ED: pos}},
	{"A 1 cm nodule in the right upper lobe.", want{LL: pos}},
	{"Healed left rib fractures.", want{FR: pos}},
	{"Opacity in the right lung base, likely atelectasis.", want{LO: pos, AT: pos}},
	{"Small bilateral effusions and bibasilar atelectasis.", want{PE: pos, AT: pos}},
	// "chf" / "heart failure" add an uncertain Cardiomegaly.
	{"Findings consistent with CHF.", want{ED: pos, CM: unc}},
	// Plurals and hyphens (phrases match inside words).
	{"No pneumothoraces.", want{PTX: neg, NF: pos}},
	{"Multiple pulmonary nodules.", want{LL: pos}},
	{"Left-sided pleural effusion.", want{PE: pos}},
	{"Right-sided pneumothorax.", want{PTX: pos}},
	{"Right-sided air-space disease.", want{LO: pos}},
	{"Pleuro-parenchymal scarring at the apices.", want{PO: pos, LO: pos}},
	// Unmention phrases.
	{"Massive right pleural effusion.", want{PE: pos}}, // "mass" inside "massive"
	{"Calcified nodule in the left lung.", want{}},     // "calcified nodul"; "calcifi" vetoes No Finding
	{"Small pericardial effusion.", want{NF: pos}},     // not a pleural effusion; no mention at all
	{"Wires project over the heart.", want{NF: pos}},   // positional unmention of "the heart"
	// Support devices do not veto No Finding; other findings do.
	{"Right PICC line in place.", want{SD: pos, NF: pos}},
	{"Endotracheal tube terminates 4 cm above the carina.", want{SD: pos, NF: pos}},
	{"Tracheostomy tube in place.", want{SD: pos}},           // "tracheostomy" is a No Finding veto
	{"Calcified granuloma in the right upper lobe.", want{}}, // No Finding vetoed only
	{"Degenerative changes of the thoracic spine.", want{}},  // "degenera"
	{"Hyperinflated lungs consistent with COPD.", want{}},    // "hyperinflat", "copd"
	{"Interstitial markings are increased.", want{LO: pos}},  // also a No Finding veto
	{"No acute cardiopulmonary process.", want{NF: pos}},
	{"Lungs are clear.", want{NF: pos}},
	{"", want{NF: pos}},
	// Scope: terminators stop a trigger.
	{"No pneumothorax. Moderate right pleural effusion.", want{PTX: neg, PE: pos}},
	{"No pleural effusion but there is a small pneumothorax.", want{PE: neg, PTX: pos}},
	{"There is a small left pleural effusion which may be loculated.", want{PE: pos}},
	{"Normal heart size with a small left pleural effusion.", want{CM: neg, PE: pos}},
	{"No pneumothorax and the heart is enlarged.", want{PTX: neg, CM: pos}},
	// Commas in lists do not count towards a trigger's reach; a comma stops
	// a trigger that follows its mention.
	{"No pneumonia, effusions, edema, pneumothorax, adenopathy, nodules or masses.", want{PN: neg, PE: neg, ED: neg, PTX: neg, LL: neg, NF: pos}},
	{"Heart size and pulmonary vascularity within normal limits.", want{CM: neg, NF: pos}},
	{"Heart and mediastinum of normal size and contour.", want{EC: neg, NF: pos}},
	{"Mild cardiomegaly, normal pulmonary vascularity.", want{CM: pos}},
	{"Cardiac size, mediastinal contour, and pulmonary vascularity are within normal limits.", want{CM: neg, EC: neg, NF: pos}},
	{"Heart size and pulmonary vascular engorgement appear within limits of normal.", want{CM: neg, NF: pos}},
	{"The heart is not significantly enlarged.", want{CM: neg, NF: pos}},
	{"There is no pleural line to suggest pneumothorax or costophrenic blunting to suggest large pleural effusion.", want{PTX: neg, PE: neg, SD: neg, NF: pos}}, // "line" is a Support Devices phrase
	// Pseudo-triggers.
	{"No change in the small left pleural effusion.", want{PE: pos}},
	// R2Gen-cleaned text (lower case, " . " between sentences, no commas).
	{"the heart size and pulmonary vascularity appear within normal limits . no pleural effusion or pneumothorax is seen .", want{CM: neg, PE: neg, PTX: neg, NF: pos}},
	{"there is no focal consolidation pleural effusion or pneumothorax . mild degenerative changes of the spine .", want{CO: neg, PE: neg, PTX: neg}},
}

func TestLabelerCases(t *testing.T) {
	if len(labelCases) < 60 {
		t.Fatalf("only %d hand-written cases", len(labelCases))
	}
	l, err := New()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range labelCases {
		var exp Labels
		for o, lab := range c.want {
			exp[o] = lab
		}
		if got := l.Label(c.report); got != exp {
			t.Errorf("%q:\n got  %v\n want %v", c.report, got, exp)
			for _, m := range l.Mentions(c.report) {
				t.Logf("  mention %v %q → %v (rule %q) in %q", m.Observation, m.Text(), m.Label, m.Rule, m.Sentence)
			}
		}
	}
}

func TestAggregateConflicts(t *testing.T) {
	l, _ := New()
	cases := []struct {
		report string
		want   Label
	}{
		{"No pleural effusion. Possible pleural effusion.", Uncertain}, // neg + unc → unc
		{"No pleural effusion. Small pleural effusion.", Positive},     // neg + pos → pos
		{"Possible pleural effusion. Small pleural effusion.", Positive},
		{"No pleural effusion. No pleural fluid.", Negative},
	}
	for _, c := range cases {
		if got := l.Label(c.report)[PleuralEffusion]; got != c.want {
			t.Errorf("%q: Pleural Effusion %v, want %v", c.report, got, c.want)
		}
	}
}

func TestLabelValues(t *testing.T) {
	if Positive.Value() != 1 || Negative.Value() != 0 || Uncertain.Value() != -1 || Blank.Value() == Blank.Value() {
		t.Error("label encodings differ from the CheXpert labeler's 1, 0, -1, NaN")
	}
	if PleuralEffusion.String() != "Pleural Effusion" || NoFinding.String() != "No Finding" {
		t.Error("observation names")
	}
}

func TestClean(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"Effusion and/or atelectasis.", "effusion or atelectasis."},
		{"Atelectasis/scarring..", "atelectasis or scarring."},
		{"a,b.c", "a, b. c"},
		{"  Two   spaces\n", "two spaces"},
	} {
		if got := clean(c.in); got != c.want {
			t.Errorf("clean(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestLicenseNotice(t *testing.T) {
	if n := LicenseNotice(); len(n) < 100 {
		t.Errorf("licence notice missing: %q", n)
	}
}
