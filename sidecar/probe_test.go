package sidecar

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

func runProbe(args ...string) (string, error) {
	cmd := NewCommand("test")
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append([]string{"probe"}, args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func TestProbeFollowsTheSidecarsState(t *testing.T) {
	s, base := newTestServer(t, testOptions())
	listen := strings.TrimPrefix(base, "http://")

	if out, err := runProbe("--listen", listen, "alive"); err != nil || !strings.Contains(out, `"ok"`) {
		t.Fatalf("alive: %q, %v", out, err)
	}
	_, err := runProbe("--listen", listen, "ready")
	if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "no bundle is loaded") {
		t.Fatalf("ready before a bundle: %v", err)
	}
	doc, rev := encode(t, denyTools("Bash"))
	if err := s.LoadDocument(doc, false); err != nil {
		t.Fatal(err)
	}
	if out, err := runProbe("--listen", listen, "ready"); err != nil || !strings.Contains(out, rev) {
		t.Fatalf("ready after loading %s: %q, %v", rev, out, err)
	}
}

func TestProbeOverAUnixSocket(t *testing.T) {
	s, err := New(testOptions())
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "sidecar.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	hs := &http.Server{Handler: s, ReadHeaderTimeout: time.Second}
	go func() { _ = hs.Serve(l) }()
	t.Cleanup(func() { _ = hs.Close() })
	// Both spellings: unix:/path, and the URL form injected probes use.
	for _, listen := range []string{"unix:" + sock, "unix://" + sock} {
		if out, err := runProbe("--listen", listen, "alive"); err != nil || !strings.Contains(out, `"ok"`) {
			t.Fatalf("alive over %s: %q, %v", listen, out, err)
		}
	}
}

func TestProbeWildcardListenAsksLoopback(t *testing.T) {
	_, base := newTestServer(t, testOptions())
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
	if _, err := runProbe("--listen", ":"+port, "alive"); err != nil {
		t.Fatalf("probe of :%s: %v", port, err)
	}
}

func TestProbeNamesWhatIsWrong(t *testing.T) {
	closed := testenv.FreeLoopbackAddr(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "one argument, alive or ready"},
		{[]string{"healthy"}, `not "healthy"`},
		{[]string{"alive", "ready"}, `not "alive ready"`},
		{[]string{"--listen", "nonsense", "alive"}, "--listen"},
		{[]string{"--listen", "unix:", "alive"}, "--listen"},
		{[]string{"--listen", "unix://host/x.sock", "alive"}, "names a host"},
		{[]string{"--timeout", "0s", "alive"}, "--timeout must be positive"},
		{[]string{"--timeout", "soon", "alive"}, "invalid argument"},
		{[]string{"--listen", closed, "alive"}, "is not answering"},
		{[]string{"--listen", "unix:" + filepath.Join(t.TempDir(), "none.sock"), "ready"}, "is not answering"},
	} {
		_, err := runProbe(tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("probe %q: error %v, want it to mention %q", tc.args, err, tc.want)
		}
	}
}

func TestProbeGivesUpAtTheTimeout(t *testing.T) {
	// A listener that accepts and never answers.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	_, err = runProbe("--listen", l.Addr().String(), "--timeout", "100ms", "ready")
	if err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("probe of a silent listener: %v", err)
	}
}
