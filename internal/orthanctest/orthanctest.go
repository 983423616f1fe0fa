// Package orthanctest starts a real PACS, Orthanc with its DICOMweb plugin,
// for tests: on loopback, on free ports, with a generated JSON
// configuration and a temporary storage directory, stopped when the test
// ends. Where Orthanc is not installed the test is skipped with a message
// saying how to install it (.ci/run installs it, so CI never skips).
package orthanctest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Plugin is where Debian's orthanc-dicomweb package puts the plugin.
const Plugin = "/usr/share/orthanc/plugins/libOrthancDicomWeb.so"

// User and Password are the credentials the server asks for (HTTP basic
// authentication).
const (
	User     = "radgen"
	Password = "test-secret"
)

// Server is a running Orthanc.
type Server struct {
	// URL is the DICOMweb root, e.g. http://127.0.0.1:40123/dicom-web.
	URL string
	// REST is Orthanc's own REST API root.
	REST string

	t      testing.TB
	bin    string
	dir    string
	config string
	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{}
	log    *os.File
}

// Binary returns the Orthanc executable, or "" with the reason it is
// missing.
func Binary() (string, string) {
	bin, err := exec.LookPath("Orthanc")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/Orthanc"); serr == nil {
			bin, err = "/usr/sbin/Orthanc", nil
		}
	}
	if err != nil {
		return "", "Orthanc is not installed (apt-get install orthanc orthanc-dicomweb; .ci/run does)"
	}
	if _, err := os.Stat(Plugin); err != nil {
		return "", "the Orthanc DICOMweb plugin is not installed at " + Plugin + " (apt-get install orthanc-dicomweb; .ci/run does)"
	}
	return bin, ""
}

// Option adds to the Orthanc configuration Start writes.
type Option func(cfg map[string]any)

// WithDicomWebServer declares a remote DICOMweb server under name (the
// DicomWeb plugin's "Servers"), so that the test can ask Orthanc to push
// studies there (POST /dicom-web/servers/{name}/stow). url is the
// server's DICOMweb root, ending in a slash.
func WithDicomWebServer(name, url string) Option {
	return func(cfg map[string]any) {
		dw := cfg["DicomWeb"].(map[string]any)
		servers, _ := dw["Servers"].(map[string]any)
		if servers == nil {
			servers = map[string]any{}
			dw["Servers"] = servers
		}
		servers[name] = []string{url}
	}
}

// Start starts an Orthanc for the test and stops it when the test ends;
// it skips the test when Orthanc cannot run here.
func Start(t testing.TB, opts ...Option) *Server {
	t.Helper()
	bin, why := Binary()
	if bin == "" {
		if os.Getenv("RADGEN_REQUIRE_ORTHANC") != "" {
			t.Fatalf("RADGEN_REQUIRE_ORTHANC is set (as .ci/run sets it) and %s", why)
		}
		t.Skip(why)
	}
	dir := t.TempDir()
	httpPort, dicomPort := freePort(t), freePort(t)
	cfg := map[string]any{
		"Name":                   "radgen-test",
		"StorageDirectory":       filepath.Join(dir, "db"),
		"IndexDirectory":         filepath.Join(dir, "db"),
		"HttpPort":               httpPort,
		"DicomPort":              dicomPort,
		"DicomServerEnabled":     false,
		"RemoteAccessAllowed":    false,
		"AuthenticationEnabled":  true,
		"RegisteredUsers":        map[string]string{User: Password},
		"HttpCompressionEnabled": false,
		"StorageCompression":     false,
		"ConcurrentJobs":         1,
		"Plugins":                []string{Plugin},
		"DicomWeb":               map[string]any{"Enable": true, "Root": "/dicom-web/", "EnableWado": false},
	}
	for _, o := range opts {
		o(cfg)
	}
	b, _ := json.MarshalIndent(cfg, "", "  ")
	s := &Server{
		URL:    fmt.Sprintf("http://127.0.0.1:%d/dicom-web", httpPort),
		REST:   fmt.Sprintf("http://127.0.0.1:%d", httpPort),
		t:      t,
		bin:    bin,
		dir:    dir,
		config: filepath.Join(dir, "orthanc.json"),
	}
	if err := os.WriteFile(s.config, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		s.Stop()
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "orthanc.log")); err == nil {
				t.Logf("Orthanc's log:\n%s", tail(b, 4096))
			}
		}
	})
	s.Restart()
	return s
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return b
}

// freePort returns a loopback TCP port free at the time of the call.
func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// Restart starts the server again after Stop, on the same ports and
// storage, and waits until it answers.
func (s *Server) Restart() {
	s.t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return
	}
	log, err := os.OpenFile(filepath.Join(s.dir, "orthanc.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatal(err)
	}
	cmd := exec.Command(s.bin, s.config)
	cmd.Dir, cmd.Stdout, cmd.Stderr = s.dir, log, log
	cmd.SysProcAttr = procAttr() // never outlives the test binary where the OS allows
	if err := cmd.Start(); err != nil {
		log.Close()
		s.t.Fatalf("starting Orthanc: %v", err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	s.cmd, s.done, s.log = cmd, done, log
	// Wait until the REST API answers (Orthanc starts in about a second).
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.REST+"/system", nil)
		req.SetBasicAuth(User, Password)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		select {
		case <-done:
			b, _ := os.ReadFile(filepath.Join(s.dir, "orthanc.log"))
			s.cmd = nil
			s.t.Fatalf("Orthanc exited at start:\n%s", tail(b, 4096))
		case <-ctx.Done():
			s.t.Fatalf("Orthanc did not answer within a minute: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop stops the server (SIGTERM, then SIGKILL after 30 s) and waits for
// it to exit. Its storage stays for Restart.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
	s.log.Close()
	s.cmd = nil
}

// Port returns the HTTP port.
func (s *Server) Port() int {
	_, p, _ := net.SplitHostPort(s.REST[len("http://"):])
	n, _ := strconv.Atoi(p)
	return n
}
