package cdp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrNoBrowser is returned by Launch when no Chromium is installed.
var ErrNoBrowser = errors.New("cdp: no Chromium found (install Debian's chromium, or set RADGEN_CHROMIUM to its path)")

// FindChromium returns the browser named by $RADGEN_CHROMIUM, or the first
// of chromium, chromium-browser, google-chrome and headless_shell on the
// PATH, or ErrNoBrowser.
func FindChromium() (string, error) {
	if p := os.Getenv("RADGEN_CHROMIUM"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("cdp: RADGEN_CHROMIUM: %w", err)
		}
		return p, nil
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable", "headless_shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNoBrowser
}

// Browser is a headless Chromium started by Launch.
type Browser struct {
	*Conn
	cmd    *exec.Cmd
	stderr *syncBuffer
}

// syncBuffer is a bytes.Buffer that the process writes while tests read.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// Launch starts a headless Chromium with a fresh profile in profileDir,
// nothing that reaches the network on its own (no sync, component updates,
// background networking or QUIC), and DevTools on a free loopback port, and
// connects to it.
func Launch(ctx context.Context, profileDir string) (*Browser, error) {
	bin, err := FindChromium()
	if err != nil {
		return nil, err
	}
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-extensions",
		"--disable-default-apps", "--no-default-browser-check", "--disable-dev-shm-usage", "--mute-audio",
		"--password-store=basic", "--use-mock-keychain", "--hide-scrollbars",
		"--user-data-dir=" + profileDir, "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", "about:blank"}
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Close ends the wrapper script and its children
	stderr := &syncBuffer{}
	cmd.Stderr, cmd.Stdout = stderr, stderr
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("cdp: starting %s: %w", bin, err)
	}
	b := &Browser{cmd: cmd, stderr: stderr}
	wsURL, err := waitDevTools(ctx, profileDir)
	if err != nil {
		b.kill()
		return nil, fmt.Errorf("%w; browser output: %s", err, tail(stderr.String()))
	}
	b.Conn, err = Dial(ctx, wsURL)
	if err != nil {
		b.kill()
		return nil, err
	}
	return b, nil
}

// waitDevTools reads the DevToolsActivePort file Chromium writes into its
// profile: the port on the first line, the browser's WebSocket path on the
// second.
func waitDevTools(ctx context.Context, dir string) (string, error) {
	for {
		b, err := os.ReadFile(filepath.Join(dir, "DevToolsActivePort"))
		if err == nil {
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			if len(lines) == 2 {
				return "ws://127.0.0.1:" + strings.TrimSpace(lines[0]) + strings.TrimSpace(lines[1]), nil
			}
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("cdp: the browser did not open DevTools: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func tail(s string) string {
	if len(s) > 2000 {
		s = "…" + s[len(s)-2000:]
	}
	return s
}

// Output returns what the browser has printed.
func (b *Browser) Output() string { return tail(b.stderr.String()) }

func (b *Browser) kill() {
	syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	b.cmd.Wait()
}

// Close closes the connection and ends the browser's process group.
func (b *Browser) Close() error {
	if b.Conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		b.Conn.Call(ctx, "", "Browser.close", nil, nil)
		cancel()
		b.Conn.Close()
	}
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		}
	}()
	err := b.cmd.Wait()
	close(done)
	syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL) // children the wrapper left
	return err
}
