package client

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/sidecar"
)

// samples is the sample policies directory: the bundle every test decides
// with, so the expected decisions are the ones the docs show.
const samples = "../config/samples"

// sampleBundle writes the samples' bundle document, as `toolgate bundle`
// prints it, and returns its path.
func sampleBundle(t testing.TB) string {
	t.Helper()
	doc, err := buildDir(samples)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bundle.json")
	if err := os.WriteFile(path, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// running is a real sidecar (sidecar.Run) serving on a loopback port and a
// Unix socket.
type running struct {
	tcp, unix string // client URLs
	stop      func()
}

// startSidecar runs the sidecar on bundleFile (which need not exist: then
// it has no bundle); tweak adjusts its options. Cleanup stops it.
func startSidecar(t testing.TB, bundleFile string, tweak func(*sidecar.Options)) *running {
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
	r := &running{}
	for range o.Listen {
		select {
		case a := <-addrs:
			if a.Network() == "unix" {
				r.unix = "unix://" + a.String()
			} else {
				r.tcp = "http://" + a.String()
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
	if fileExists(bundleFile) {
		waitReady(t, r.tcp)
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

func newClient(t testing.TB, opts Options) *Client {
	t.Helper()
	c, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func evaluate(t testing.TB, e Evaluator, req Request) Result {
	t.Helper()
	res, err := e.Evaluate(context.Background(), req)
	if err != nil {
		t.Fatalf("Evaluate(%s): %v", req.ToolName, err)
	}
	return res
}

// sampleRequest reads a request of config/samples/requests as a Request.
func sampleRequest(t testing.TB, name string) Request {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(samples, "requests", name))
	if err != nil {
		t.Fatal(err)
	}
	return requestOf(t, doc)
}

// requestOf is a request document as an agent developer would pass it:
// the fields Request names in its typed fields, any other in Extra.
func requestOf(t testing.TB, doc []byte) Request {
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
	r := Request{ToolName: str("tool_name"), SessionID: str("session_id"), AgentID: str("agent_id"),
		ToolUseID: str("tool_use_id"), Framework: str("framework"), Input: m["input"], Args: m["args"], Kwargs: m["kwargs"]}
	delete(m, "input")
	delete(m, "args")
	delete(m, "kwargs")
	if len(m) > 0 {
		r.Extra = m
	}
	return r
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// renameFile replaces to in one step, as a writer publishing a bundle
// should.
func renameFile(t testing.TB, from, to string) {
	t.Helper()
	if err := os.Rename(from, to); err != nil {
		t.Fatal(err)
	}
}
