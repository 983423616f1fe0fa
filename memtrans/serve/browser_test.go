package serve

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/radgen/radgen/internal/cdp"
	"github.com/radgen/radgen/memtrans"
)

// TestPageInBrowser drives the web page in a headless Chromium: it uploads
// a synthetic study through the file input, waits for the report, clicks a
// word and checks that its attention heatmap is drawn over both views, and
// downloads the FHIR JSON. The screenshot is saved in the test's temporary
// directory (and in $RADGEN_SCREENSHOT_DIR when set).
func TestPageInBrowser(t *testing.T) {
	if _, err := cdp.FindChromium(); errors.Is(err, cdp.ErrNoBrowser) {
		t.Skip("no Chromium installed (apt-get install chromium, or set RADGEN_CHROMIUM): the page is not tested in a browser")
	}
	f := tinyFixture(t)
	want := sequential(t, memtrans.WithAttention())
	h := newHandler(t, WithModelName("tiny-r2gen"))
	if err := h.WarmUp(context.Background()); err != nil {
		t.Fatal(err)
	}
	srv := server(t, h)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	b, err := cdp.Launch(ctx, filepath.Join(tmp, "profile"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		b.Close()
		if t.Failed() {
			t.Logf("browser output:\n%s", b.Output())
		}
	}()
	downloads := filepath.Join(tmp, "downloads")
	if err := b.Call(ctx, "", "Browser.setDownloadBehavior", map[string]any{"behavior": "allow", "downloadPath": downloads}, nil); err != nil {
		t.Fatal(err)
	}
	page, err := b.NewPage(ctx, 1200, 900)
	if err != nil {
		t.Fatal(err)
	}
	exceptions, stop := b.Subscribe(page.Session, "Runtime.exceptionThrown")
	defer stop()
	violations, stopV := b.Subscribe(page.Session, "Log.entryAdded")
	defer stopV()
	if err := page.Call(ctx, "Log.enable", nil, nil); err != nil {
		t.Fatal(err)
	}

	if err := page.Navigate(ctx, srv.URL+"/"); err != nil {
		t.Fatal(err)
	}
	if err := page.WaitFor(ctx, `document.querySelector("#model").textContent.includes("tiny-r2gen")`); err != nil {
		t.Fatal(err)
	}
	s := f.studies[0]
	if err := page.SetFiles(ctx, "#files", []string{s.paths[1], s.paths[0]}); err != nil { // the page sorts them by name
		t.Fatal(err)
	}
	if err := page.WaitFor(ctx, `document.querySelectorAll(".word").length > 0 && document.querySelectorAll("canvas.heat").length === 2 || document.querySelector("#status").classList.contains("error")`); err != nil {
		t.Fatal(err)
	}
	var status string
	page.Eval(ctx, `document.querySelector("#status").textContent`, &status)
	var words []string
	if err := page.Eval(ctx, `[...document.querySelectorAll(".word")].map(e => e.textContent)`, &words); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(words, " "); got != want[0].Text {
		t.Fatalf("page shows %q (status %q), Generate wrote %q", got, status, want[0].Text)
	}

	// Nothing drawn before a word is chosen; the chosen word's map after.
	const heat = `[...document.querySelectorAll("canvas.heat")].map(c => {
		const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
		let drawn = 0; const colours = new Set();
		for (let i = 0; i < d.length; i += 4) { if (d[i + 3] > 0) { drawn++; colours.add(d[i] << 16 | d[i + 1] << 8 | d[i + 2]); } }
		return {drawn, pixels: d.length / 4, colours: colours.size};
	})`
	type canvasStats struct{ Drawn, Pixels, Colours int }
	var before, after []canvasStats
	if err := page.Eval(ctx, heat, &before); err != nil {
		t.Fatal(err)
	}
	if len(before) != 2 || before[0].Drawn != 0 || before[1].Drawn != 0 {
		t.Fatalf("heatmaps before a click: %+v", before)
	}
	const word = 2
	if err := page.Click(ctx, `.word[data-t="2"]`); err != nil {
		t.Fatal(err)
	}
	if err := page.WaitFor(ctx, `document.querySelector('.word[data-t="2"]').classList.contains("on")`); err != nil {
		t.Fatal(err)
	}
	if err := page.Eval(ctx, heat, &after); err != nil {
		t.Fatal(err)
	}
	for v, c := range after {
		// Every pixel is covered, in more than one colour: the map of a
		// word whose attention is not uniform over the patches.
		if c.Pixels == 0 || c.Drawn != c.Pixels || c.Colours < 2 {
			t.Errorf("view %d heatmap of word %d: %+v", v, word, c)
		}
	}
	var label string
	page.Eval(ctx, `document.querySelector("#current").textContent`, &label)
	if !strings.Contains(label, words[word]) {
		t.Errorf("heatmap label %q for word %q", label, words[word])
	}

	png, err := page.Screenshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(tmp, "viewer.png")
	if err := os.WriteFile(shot, png, 0o644); err != nil {
		t.Fatal(err)
	}
	if dir := os.Getenv("RADGEN_SCREENSHOT_DIR"); dir != "" {
		os.WriteFile(filepath.Join(dir, "viewer.png"), png, 0o644)
	}
	t.Logf("screenshot: %s (%d bytes)", shot, len(png))

	// The FHIR download.
	if err := page.Click(ctx, "#fhir"); err != nil {
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
		ResourceType string `json:"resourceType"`
		Conclusion   string `json:"conclusion"`
	}
	if err := json.Unmarshal(fhirFile, &dr); err != nil || dr.ResourceType != "DiagnosticReport" || dr.Conclusion == "" {
		t.Errorf("downloaded FHIR: %v %.200s", err, fhirFile)
	}

	for {
		select {
		case e := <-exceptions:
			t.Errorf("page exception: %s", e)
			continue
		case e := <-violations:
			if strings.Contains(string(e), `"level":"error"`) {
				t.Errorf("console error: %s", e)
			}
			continue
		default:
		}
		break
	}
}
