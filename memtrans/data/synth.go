package data

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sync/errgroup"
)

// Side says where a finding is, in the patient's frame (on a frontal film
// the patient's left is the image's right).
type Side uint8

// Sides of a finding.
const (
	None Side = iota
	Left
	Right
	Both
)

// String returns the side as the reports name it.
func (s Side) String() string {
	return [...]string{"none", "left", "right", "bilateral"}[min(int(s), 3)]
}

// has reports whether s includes the single side one.
func (s Side) has(one Side) bool { return s == one || s == Both && one != None }

// Zone is the lung zone of a focal opacity.
type Zone uint8

// Lung zones.
const (
	Upper Zone = iota
	Lower
)

// String returns the lung zone as the reports name it.
func (z Zone) String() string {
	if z == Lower {
		return "lower"
	}
	return "upper"
}

// Device is a support device visible on the film.
type Device uint8

// Support devices.
const (
	NoDevice  Device = iota
	Pacemaker        // left chest wall generator with a lead to the heart
	Catheter         // right internal jugular central venous catheter
)

// Findings are the ground truth of a synthetic study.
type Findings struct {
	// CTR is the cardiothoracic ratio, heart width over thoracic width.
	// Above 0.5 is cardiomegaly; sampled from 0.38–0.47 or 0.57–0.68.
	CTR          float64
	Effusion     Side // pleural effusion: None, Left, Right or Both
	Opacity      Side // focal airspace opacity: None, Left or Right
	OpacityZone  Zone // its lung zone
	Pneumothorax Side // None, Left or Right
	Device       Device
}

// Cardiomegaly reports a cardiothoracic ratio above 0.5.
func (f Findings) Cardiomegaly() bool { return f.CTR > 0.5 }

// Normal reports a study without pathology (a support device may be there).
func (f Findings) Normal() bool {
	return !f.Cardiomegaly() && f.Effusion == None && f.Opacity == None && f.Pneumothorax == None
}

// NumLabels is the number of CheXpert-style labels.
const NumLabels = 14

// LabelNames are the 14 CheXpert observations in the order of the CheXpert
// dataset's label columns. (The CheXpert labeler's constants.py swaps Lung
// Lesion and Lung Opacity.)
var LabelNames = [NumLabels]string{
	"No Finding", "Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Opacity", "Lung Lesion",
	"Edema", "Consolidation", "Pneumonia", "Atelectasis", "Pneumothorax", "Pleural Effusion",
	"Pleural Other", "Fracture", "Support Devices",
}

// Label indices in [LabelNames].
const (
	LabelNoFinding       = 0
	LabelCardiomegaly    = 2
	LabelLungOpacity     = 3
	LabelPneumothorax    = 9
	LabelPleuralEffusion = 10
	LabelSupportDevices  = 13
)

// Labels returns the 14 CheXpert-style labels: 1 present, 0 absent. No
// Finding follows CheXpert's rule: 1 when nothing but support devices is
// present.
func (f Findings) Labels() []int8 {
	l := make([]int8, NumLabels)
	b := func(i int, on bool) {
		if on {
			l[i] = 1
		}
	}
	b(LabelNoFinding, f.Normal())
	b(LabelCardiomegaly, f.Cardiomegaly())
	b(LabelLungOpacity, f.Opacity != None)
	b(LabelPneumothorax, f.Pneumothorax != None)
	b(LabelPleuralEffusion, f.Effusion != None)
	b(LabelSupportDevices, f.Device != NoDevice)
	return l
}

// Report writes the findings as an IU X-Ray style report from a small fixed
// set of sentences, in a fixed order: heart, mediastinum, device, lungs,
// pleura, bones. The same findings always give the same report, so a model
// that sees the findings can reproduce it word for word.
func (f Findings) Report() string {
	var s []string
	if f.Cardiomegaly() {
		s = append(s, "The heart is enlarged.")
	} else {
		s = append(s, "The heart is normal in size.")
	}
	s = append(s, "The mediastinum is unremarkable.")
	switch f.Device {
	case Pacemaker:
		s = append(s, "A left chest wall pacemaker is in place.")
	case Catheter:
		s = append(s, "A right internal jugular catheter is in place.")
	}
	if f.Opacity != None {
		s = append(s, fmt.Sprintf("There is focal airspace opacity in the %s %s lobe.", f.Opacity, f.OpacityZone))
	} else {
		s = append(s, "The lungs are clear.")
	}
	switch {
	case f.Effusion == None && f.Pneumothorax == None:
		s = append(s, "There is no pleural effusion or pneumothorax.")
	default:
		switch f.Effusion {
		case None:
			s = append(s, "There is no pleural effusion.")
		case Both:
			s = append(s, "There are small bilateral pleural effusions.")
		default:
			s = append(s, fmt.Sprintf("There is a small %s pleural effusion.", f.Effusion))
		}
		if f.Pneumothorax == None {
			s = append(s, "There is no pneumothorax.")
		} else {
			s = append(s, fmt.Sprintf("There is a %s pneumothorax.", f.Pneumothorax))
		}
	}
	s = append(s, "The osseous structures are intact.")
	return strings.Join(s, " ")
}

// SampleFindings draws findings with the synthetic prevalences: about 30%
// cardiomegaly, 25% effusion (left, right or bilateral), 25% focal opacity,
// 12% pneumothorax and 20% support devices, independently; about 35% of
// studies have no pathology.
func SampleFindings(rng *rand.Rand) Findings {
	side := func() Side {
		if rng.IntN(2) == 0 {
			return Left
		}
		return Right
	}
	var f Findings
	if rng.Float64() < 0.3 {
		f.CTR = 0.57 + 0.11*rng.Float64()
	} else {
		f.CTR = 0.38 + 0.09*rng.Float64()
	}
	if rng.Float64() < 0.25 {
		f.Effusion = side()
		if rng.Float64() < 0.2 {
			f.Effusion = Both
		}
	}
	if rng.Float64() < 0.25 {
		f.Opacity, f.OpacityZone = side(), Zone(rng.IntN(2))
	}
	if rng.Float64() < 0.12 {
		f.Pneumothorax = side()
	}
	if rng.Float64() < 0.2 {
		f.Device = Pacemaker
		if rng.Float64() < 0.4 {
			f.Device = Catheter
		}
	}
	return f
}

// RenderFilm draws one view of a study with these findings at w×h, 8-bit
// gray. rng supplies the patient's position, size and exposure and the film
// noise; the same source state gives the same film.
func RenderFilm(f Findings, view View, w, h int, rng *rand.Rand) *image.Gray {
	return render(f, newAnatomy(rng), view, w, h, rng)
}

// SynthStudy is one generated study.
type SynthStudy struct {
	Study    Study
	Findings Findings
	Films    []*image.Gray // one per view: frontal, then lateral for IU X-Ray
}

// SynthConfig sets what [WriteSynthetic] generates.
type SynthConfig struct {
	// Corpus is the layout: IUXray (default) gives two views per study
	// (frontal and lateral) under <id>/0.png and <id>/1.png; MIMICCXR gives
	// one frontal view under p1X/p<subject>/s<study>/<id>.png with
	// study_id and subject_id.
	Corpus Corpus
	// Studies per split; the defaults are 280, 40 and 80.
	Train, Val, Test int
	// Film size in pixels; the default is 128×128.
	Width, Height int
	// Seed makes the data set: the same seed gives the same files.
	Seed uint64
}

func (c *SynthConfig) defaults() error {
	if c.Corpus == "" {
		c.Corpus = IUXray
	}
	if err := c.Corpus.check(); err != nil {
		return err
	}
	if c.Train == 0 && c.Val == 0 && c.Test == 0 {
		c.Train, c.Val, c.Test = 280, 40, 80
	}
	if c.Width == 0 && c.Height == 0 {
		c.Width, c.Height = 128, 128
	}
	if c.Train < 0 || c.Val < 0 || c.Test < 0 || c.Width < 8 || c.Height < 8 || c.Width > 8192 || c.Height > 8192 {
		return fmt.Errorf("data: synthetic config: %d/%d/%d studies of %d×%d", c.Train, c.Val, c.Test, c.Width, c.Height)
	}
	return nil
}

// GenerateStudy makes study number i (counting across the splits train,
// val, test) of the data set cfg describes, without touching the disk. It
// depends only on cfg.Seed, cfg's layout and size, and i.
func GenerateStudy(cfg SynthConfig, split string, i int) (SynthStudy, error) {
	if err := cfg.defaults(); err != nil {
		return SynthStudy{}, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(i)))
	f := SampleFindings(rng)
	a := newAnatomy(rng)
	st := SynthStudy{Findings: f}
	s := Study{Report: f.Report(), Split: split, Labels: f.Labels()}
	views := cfg.Corpus.Views()
	if cfg.Corpus == IUXray {
		s.ID = fmt.Sprintf("SYN%05d", i)
		for v := range views {
			s.ImagePath = append(s.ImagePath, fmt.Sprintf("%s/%d.png", s.ID, v))
		}
	} else {
		s.SubjectID, s.StudyID = 10000000+int64(i), 50000000+int64(i)
		s.ID = fmt.Sprintf("%08x-%08x", splitmix(cfg.Seed)>>32, splitmix(uint64(i))>>32)
		s.ImagePath = []string{fmt.Sprintf("p%d/p%d/s%d/%s.png", s.SubjectID/1000000, s.SubjectID, s.StudyID, s.ID)}
	}
	for v := range views {
		st.Films = append(st.Films, render(f, a, View(v), cfg.Width, cfg.Height, rng))
	}
	st.Study = s
	return st, nil
}

// WriteSynthetic generates a data set into dir: dir/annotation.json in
// R2Gen's format (each study with its "labels") and the films as 8-bit gray
// PNGs under dir/images, the image directory to give [DatasetConfig]. The
// studies are generated in parallel; the files depend only on cfg.
func WriteSynthetic(ctx context.Context, dir string, cfg SynthConfig) (*Annotation, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	counts := [3]int{cfg.Train, cfg.Val, cfg.Test}
	total := counts[0] + counts[1] + counts[2]
	studies := make([]Study, total)
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	n := 0
	for k, split := range Splits {
		for range counts[k] {
			i := n
			g.Go(func() error {
				if err := ctx.Err(); err != nil {
					return err
				}
				st, err := GenerateStudy(cfg, split, i)
				if err != nil {
					return err
				}
				for v, img := range st.Films {
					if err := writePNG(filepath.Join(dir, "images", filepath.FromSlash(st.Study.ImagePath[v])), img); err != nil {
						return err
					}
				}
				studies[i] = st.Study
				return nil
			})
			n++
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	ann := NewAnnotation(map[string][]Study{
		"train": studies[:counts[0]],
		"val":   studies[counts[0] : counts[0]+counts[1]],
		"test":  studies[counts[0]+counts[1]:],
	})
	b, err := json.Marshal(ann)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "annotation.json"), b, 0o644); err != nil {
		return nil, err
	}
	return ann, nil
}

func writePNG(name string, img image.Image) error {
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		return err
	}
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(w, img); err != nil {
		f.Close()
		return fmt.Errorf("data: writing %s: %w", name, err)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
