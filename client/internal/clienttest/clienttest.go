// Package clienttest is what the tests of client and client/local share:
// the sample policies and their bundle, a real sidecar to ask, and
// requests written as an agent developer writes them.
package clienttest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/endpoint"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/manifest"
	"github.com/toolgate/toolgate/sidecar"
)

// Samples is the sample policies directory: the bundle every test decides
// with, so the expected decisions are the ones the docs show.
var Samples = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "config", "samples")
}()

// AskPolicy is the ask rule the clients' tests share (Python's and
// TypeScript's read the same file): pay over 1000 asks for a person.
var AskPolicy = filepath.Join(Samples, "..", "..", "clients", "testdata", "pay-ask.yaml")

// SampleBundle writes the samples' bundle document, as `toolgate bundle`
// prints it, and returns its path.
func SampleBundle(t testing.TB) string {
	t.Helper()
	return BundleOf(t, Samples)
}

// BundleOf writes the bundle document of the manifests at path (a file or
// a directory), as `toolgate bundle -f path` prints it, and returns its
// path.
func BundleOf(t testing.TB, path string) string {
	t.Helper()
	_, b, err := manifest.LoadBundle([]string{path}, nil, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	doc, _, err := engine.Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "bundle.json")
	if err := os.WriteFile(out, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// Sidecar is a real sidecar (sidecar.Run) serving on a loopback port and a
// Unix socket.
type Sidecar struct {
	TCP, Unix string // client URLs
	stop      func()
}

// Stop stops the sidecar (and flushes its decision log); Cleanup does too.
func (s *Sidecar) Stop() { s.stop() }

// StartSidecar runs the sidecar on bundleFile (which need not exist: then
// it has no bundle); tweak adjusts its options. Cleanup stops it.
func StartSidecar(t testing.TB, bundleFile string, tweak func(*sidecar.Options)) *Sidecar {
	t.Helper()
	// A socket path must fit in 108 bytes; t.TempDir() can be longer.
	dir, err := os.MkdirTemp("", "tgc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	sock := filepath.Join(dir, "s.sock")
	o := sidecar.DefaultOptions()
	o.Listen = []string{"127.0.0.1:0", "unix:" + sock}
	o.BundleFile = bundleFile
	o.PollInterval = 100 * time.Millisecond
	o.DecisionLog, o.DecisionLogWriter = sidecar.DecisionLogStdout, io.Discard
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	if tweak != nil {
		tweak(&o)
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan net.Addr, len(o.Listen))
	done := make(chan error, 1)
	go func() { done <- sidecar.Run(ctx, o, func(a net.Addr) { addrs <- a }) }()
	r := &Sidecar{}
	for range o.Listen {
		select {
		case a := <-addrs:
			if a.Network() == "unix" {
				r.Unix = endpoint.UnixURL(a.String())
			} else {
				r.TCP = "http://" + a.String()
			}
		case err := <-done:
			cancel()
			t.Fatalf("the sidecar ended before listening: %v", err)
		case <-time.After(30 * time.Second):
			cancel()
			t.Fatal("the sidecar did not start listening")
		}
	}
	stopped := false
	r.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("the sidecar stopped with %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("the sidecar did not stop")
		}
	}
	t.Cleanup(r.stop)
	if FileExists(bundleFile) {
		waitReady(t, r.TCP)
	}
	return r
}

// waitReady waits for /readyz: the sidecar loads its bundle after it
// starts listening.
func waitReady(t testing.TB, base string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("the sidecar at %s did not load its bundle", base)
}

// NewClient is client.New, closed by Cleanup.
func NewClient(t testing.TB, opts client.Options) *client.Client {
	t.Helper()
	c, err := client.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// Evaluate asks e to decide req; an error fails the test.
func Evaluate(t testing.TB, e client.Evaluator, req client.Request) client.Result {
	t.Helper()
	res, err := e.Evaluate(context.Background(), req)
	if err != nil {
		t.Fatalf("Evaluate(%s): %v", req.ToolName, err)
	}
	return res
}

// SampleRequest reads a request of config/samples/requests as a Request.
func SampleRequest(t testing.TB, name string) client.Request {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(Samples, "requests", name))
	if err != nil {
		t.Fatal(err)
	}
	return RequestOf(t, doc)
}

// RequestOf is a request document as an agent developer would pass it:
// the fields Request names in its typed fields, any other in Extra.
func RequestOf(t testing.TB, doc []byte) client.Request {
	t.Helper()
	m, err := engine.DecodeRequest(doc)
	if err != nil {
		t.Fatal(err)
	}
	str := func(key string) string {
		s, _ := m[key].(string)
		delete(m, key)
		return s
	}
	r := client.Request{ToolName: str("tool_name"), SessionID: str("session_id"), AgentID: str("agent_id"),
		ToolUseID: str("tool_use_id"), Framework: str("framework"), Input: m["input"], Args: m["args"], Kwargs: m["kwargs"]}
	delete(m, "input")
	delete(m, "args")
	delete(m, "kwargs")
	if len(m) > 0 {
		r.Extra = m
	}
	return r
}

// FileExists tells whether path exists.
func FileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
