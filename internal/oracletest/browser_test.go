package oracletest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode"

	"github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/radgen/radgen/internal/testutil"
	"github.com/radgen/radgen/memtrans"
	"github.com/radgen/radgen/memtrans/serve"
	"github.com/radgen/radgen/memtrans/synth"
)

// findChromium returns the browser to drive: $RADGEN_CHROMIUM, or the first
// of the usual names on PATH.
func findChromium() (string, error) {
	if p := os.Getenv("RADGEN_CHROMIUM"); p != "" {
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no Chromium")
}

var (
	trainedOnce sync.Once
	trained     *synth.Result
	trainedDir  string
	trainedErr  error
)

// trainedModel trains a tiny R2Gen model on synthetic films (a few
// epochs: enough for it to write the synthetic reports' sentences), once
// per test binary; it returns the run and the directory of its films.
func trainedModel(t *testing.T) (*synth.Result, string) {
	trainedOnce.Do(func() {
		trainedDir, trainedErr = os.MkdirTemp("", "radgen-oracletest-")
		if trainedErr != nil {
			return
		}
		o := synth.Options{Dir: trainedDir, Train: 96, Test: 8, Size: 64, Epochs: 6, BatchSize: 16, Seed: 3, Beam: 3}
		trained, trainedErr = synth.Run(context.Background(), o)
	})
	if trainedErr != nil {
		t.Fatal(trainedErr)
	}
	return trained, trainedDir
}

func TestMain(m *testing.M) {
	code := m.Run()
	if trained != nil {
		trained.Model.Close()
	}
	if trainedDir != "" {
		os.RemoveAll(trainedDir)
	}
	os.Exit(code)
}

// writeDICOMStudy writes a held-out study's films as DICOM files with a
// patient and a study date, and returns their paths.
func writeDICOMStudy(t *testing.T, st memtrans.Study, dir string) []string {
	var paths []string
	for i, v := range st.Views {
		b := v.Bounds()
		// The lateral view is a portrait film: black rows below it.
		w, h := b.Dx(), b.Dy()
		if i == 1 {
			h = h * 3 / 2
		}
		pix := make([]byte, w*h)
		for y := range b.Dy() {
			for x := range b.Dx() {
				r, g, bl, _ := v.At(b.Min.X+x, b.Min.Y+y).RGBA()
				pix[y*w+x] = uint8((r + g + bl) / 3 >> 8)
			}
		}
		file := testutil.DICOMImage(w, h, pix, map[uint32]string{
			testutil.TagPatientName: "DOE^JANE", testutil.TagPatientID: "P-1042", testutil.TagStudyDate: "20120115",
			testutil.TagStudyTime: "0930", testutil.TagAccessionNumber: "ACC-77", testutil.TagStudyInstanceUID: "1.2.826.0.1.3680043.8.498.2012",
			testutil.TagStudyDescription: "CHEST PA AND LATERAL", testutil.TagModality: "DX",
		})
		p := filepath.Join(dir, fmt.Sprintf("%d.dcm", i))
		if err := os.WriteFile(p, file, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return paths
}

// formatted is what the page must show for a report's words: sentences
// capitalised, punctuation attached to the word before it.
func formatted(words []string) string {
	var b strings.Builder
	start := true
	for _, w := range words {
		if w == "" {
			continue
		}
		punct := strings.Contains(".,;:?!)", w) && len(w) == 1
		if b.Len() > 0 && !punct {
			b.WriteByte(' ')
		}
		if start && !punct {
			r := []rune(w)
			r[0] = unicode.ToUpper(r[0])
			w = string(r)
		}
		b.WriteString(w)
		if punct {
			start = strings.Contains(".?!", w)
		} else {
			start = false
		}
	}
	return b.String()
}

// TestPageInBrowser drives the page in headless Chromium: it uploads a
// held-out synthetic study as DICOM files through the file input, waits
// for the report, and checks what a reader sees: the report as sentences
// (as Generate wrote it, formatted), the patient and study from the DICOM
// header, the warning that the model was trained on synthetic films,
// films without a band beside them, a word's attention drawn over both
// views on a click, window and level changing a DICOM view, and the FHIR
// download. The screenshot is saved in $RADGEN_SCREENSHOT_DIR when set.
func TestPageInBrowser(t *testing.T) {
	chromium, err := findChromium()
	if err != nil {
		t.Skip("no Chromium installed (apt-get install chromium, or set RADGEN_CHROMIUM): the page is not tested in a browser")
	}
	res, _ := trainedModel(t)
	h, err := serve.New(res.Model, serve.WithModelName("tiny-r2gen (synthetic)"))
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if err := h.WarmUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()

	tmp := t.TempDir()
	st := res.Studies[0]
	paths := writeDICOMStudy(t, st, tmp)
	// What Generate writes for the same files (the page's default beam, 3).
	fromFiles, err := memtrans.StudyFromFiles(st.ID, paths...)
	if err != nil {
		t.Fatal(err)
	}
	want, err := res.Model.Generate(context.Background(), []memtrans.Study{fromFiles}, memtrans.WithBeamSize(3))
	if err != nil {
		t.Fatal(err)
	}
	tok := res.Model.Tokenizer()
	var words []string
	for _, id := range want[0].Tokens {
		if id != 0 {
			words = append(words, tok.Token(id))
		}
	}
	wantText := formatted(words)
	t.Logf("Generate wrote %q", want[0].Text)
	if !strings.Contains(want[0].Text, " . ") || strings.Count(want[0].Text, " ") < 6 {
		t.Fatalf("the trained model does not write sentences: %q", want[0].Text)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(chromium), chromedp.NoSandbox, chromedp.WindowSize(1200, 1000),
		chromedp.UserDataDir(filepath.Join(tmp, "profile")))
	actx, cancelA := chromedp.NewExecAllocator(ctx, opts...)
	defer cancelA()
	bctx, cancelB := chromedp.NewContext(actx)
	defer cancelB()
	var mu sync.Mutex
	var pageErrors []string
	if err := chromedp.Listen(bctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			pageErrors = append(pageErrors, fmt.Sprintf("exception: %s %+v", ev.ExceptionDetails.Text, ev.ExceptionDetails.Exception))
		case *cdplog.EventEntryAdded:
			if ev.Entry.Level == cdplog.EntryLevelError {
				pageErrors = append(pageErrors, "console: "+ev.Entry.Text)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	downloads := filepath.Join(tmp, "downloads")
	if _, err := chromedp.CallBrowser(bctx, browser.SetDownloadBehavior, browser.SetDownloadBehaviorParams{Behavior: browser.SetDownloadBehaviorBehaviorAllow, DownloadPath: downloads}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(bctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx,
		chromedp.Navigate(srv.URL+"/"),
		chromedp.WaitVisible(chromedp.CSS("#provenance")),
		chromedp.SetUploadFiles(chromedp.CSS("#files"), []string{paths[1], paths[0]}), // the page sorts them by name
		chromedp.WaitVisible(chromedp.CSS("#result")),
	); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.querySelectorAll("canvas.heat").length === 2`)); err != nil {
		t.Fatal(err)
	}

	type figure struct {
		Figure float64 `json:"figure"`
		Canvas float64 `json:"canvas"`
		Stack  float64 `json:"stack"`
	}
	type pageState struct {
		Text     string   `json:"text"`
		Status   string   `json:"status"`
		Banner   string   `json:"banner"`
		Identity []string `json:"identity"`
		Warnings []string `json:"warnings"`
		Figures  []figure `json:"figures"`
	}
	page, err := chromedp.Run(bctx, chromedp.Evaluate[pageState](`({
		text: document.querySelector("#words").textContent,
		status: document.querySelector("#status").textContent,
		banner: document.querySelector("#provenance").textContent,
		identity: [...document.querySelectorAll("#identity div")].map(d => d.textContent),
		warnings: [...document.querySelectorAll("#warnings .warning")].map(p => p.textContent),
		figures: [...document.querySelectorAll("figure.view")].map(f => ({
			figure: f.getBoundingClientRect().width,
			canvas: f.querySelector("canvas.img").getBoundingClientRect().width,
			stack: f.querySelector(".stack").getBoundingClientRect().width})),
	})`))
	if err != nil {
		t.Fatal(err)
	}
	if page.Text != wantText {
		t.Errorf("the page shows %q (status %q), want %q", page.Text, page.Status, wantText)
	}
	for _, want := range []string{"PatientDOE, JANE", "Patient IDP-1042", "Study date2012-01-15 09:30", "AccessionACC-77", "StudyCHEST PA AND LATERAL"} {
		if !contains(page.Identity, want) {
			t.Errorf("the page's identity %q lacks %q", page.Identity, want)
		}
	}
	if !strings.Contains(page.Banner, "trained on synthetic films") || !contains(page.Warnings, "Written by a model trained on synthetic films: not a reading of this study.") {
		t.Errorf("no synthetic-data warning: banner %q, warnings %q", page.Banner, page.Warnings)
	}
	if len(page.Figures) != 2 {
		t.Fatalf("figures %+v", page.Figures)
	}
	for i, f := range page.Figures {
		if f.Figure != f.Canvas || f.Stack != f.Canvas {
			t.Errorf("view %d: figure %v px, stack %v px, film %v px wide: a band beside the film", i, f.Figure, f.Stack, f.Canvas)
		}
	}

	// A word's attention: nothing drawn before, every pixel after a click.
	const heat = `[...document.querySelectorAll("canvas.heat")].map(c => {
		const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
		let drawn = 0; const colours = new Set();
		for (let i = 0; i < d.length; i += 4) { if (d[i + 3] > 0) { drawn++; colours.add(d[i] << 16 | d[i + 1] << 8 | d[i + 2]); } }
		return {drawn, pixels: d.length / 4, colours: colours.size};
	})`
	type canvasStats struct {
		Drawn   int `json:"drawn"`
		Pixels  int `json:"pixels"`
		Colours int `json:"colours"`
	}
	before, err := chromedp.Run(bctx, chromedp.Evaluate[[]canvasStats](heat))
	if err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS(`.word[data-t="1"]`))); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Run(bctx, chromedp.Poll[bool](`document.querySelector('.word[data-t="1"]').classList.contains("on")`)); err != nil {
		t.Fatal(err)
	}
	after, err := chromedp.Run(bctx, chromedp.Evaluate[[]canvasStats](heat))
	if err != nil {
		t.Fatal(err)
	}
	label, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS("#current")))
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != 2 || before[0].Drawn != 0 || before[1].Drawn != 0 {
		t.Errorf("heatmaps before a click: %+v", before)
	}
	for v, c := range after {
		if c.Pixels == 0 || c.Drawn != c.Pixels || c.Colours < 2 {
			t.Errorf("view %d heatmap of word 1: %+v", v, c)
		}
	}
	if !strings.Contains(label, words[1]) {
		t.Errorf("heatmap label %q for word %q", label, words[1])
	}

	// Window and level on a DICOM view: a narrow window changes the film.
	const filmSum = `(() => { const c = document.querySelector("canvas.img"); const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
		let s = 0; for (let i = 0; i < d.length; i += 4) s += d[i]; return s; })()`
	setWindow := func(v string) float64 {
		t.Helper()
		if err := chromedp.Do(bctx, chromedp.SetValue(chromedp.CSS(".wl-width"), v)); err != nil {
			t.Fatal(err)
		}
		if _, err := chromedp.Run(bctx, chromedp.Evaluate[bool](`document.querySelector(".wl-width").dispatchEvent(new Event("input"))`)); err != nil {
			t.Fatal(err)
		}
		sum, err := chromedp.Run(bctx, chromedp.Evaluate[float64](filmSum))
		if err != nil {
			t.Fatal(err)
		}
		return sum
	}
	sum0, err := chromedp.Run(bctx, chromedp.Evaluate[float64](filmSum))
	if err != nil {
		t.Fatal(err)
	}
	if sum1 := setWindow("40"); sum1 == sum0 {
		t.Errorf("window 40 left the film unchanged (sum %v)", sum0)
	}
	if sum2 := setWindow("255"); sum2 != sum0 {
		t.Errorf("the full window does not give the film back: %v, was %v", sum2, sum0)
	}
	png, err := chromedp.Run(bctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(tmp, "viewer.png")
	os.WriteFile(shot, png, 0o644)
	if dir := os.Getenv("RADGEN_SCREENSHOT_DIR"); dir != "" {
		os.WriteFile(filepath.Join(dir, "viewer.png"), png, 0o644)
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))

	// The FHIR download.
	if err := chromedp.Do(bctx, chromedp.Click(chromedp.CSS("#fhir"))); err != nil {
		t.Fatal(err)
	}
	var fhirFile []byte
	for ctx.Err() == nil {
		if fhirFile, err = os.ReadFile(filepath.Join(downloads, "report.fhir.json")); err == nil && json.Valid(fhirFile) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	var dr struct {
		ResourceType      string `json:"resourceType"`
		Conclusion        string `json:"conclusion"`
		EffectiveDateTime string `json:"effectiveDateTime"`
	}
	if err := json.Unmarshal(fhirFile, &dr); err != nil || dr.ResourceType != "DiagnosticReport" || dr.Conclusion != want[0].Text || dr.EffectiveDateTime != "2012-01-15" {
		t.Errorf("downloaded FHIR: %v %.300s", err, fhirFile)
	}
	if err := validateFHIR(t, fhirFile); err != nil {
		t.Errorf("the downloaded FHIR report: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, e := range pageErrors {
		t.Errorf("page %s", e)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
