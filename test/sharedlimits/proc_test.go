package sharedlimits

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/localcluster"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/sidecar"
)

// toolgateBin is the real toolgate binary, built once by TestMain.
var toolgateBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "tg-shared-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	toolgateBin, err = localcluster.BuildToolgate(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// namespace is the one the sidecars count shared limits for.
const namespace = "agents"

// sharedBundle limits pay to max calls an hour across the whole namespace,
// shared by every sidecar; tip likewise but failOpen; lookup is counted by
// each sidecar alone; read is unlimited.
func sharedBundle(max int64) engine.Bundle {
	return engine.Bundle{Policies: []engine.Policy{{ID: "limits", Version: 1, DefaultEffect: "allow", Rules: []engine.Rule{
		{ID: "pay-per-namespace", Effect: "deny", Description: "pay is limited across the namespace",
			Targets: &engine.Targets{Tools: []string{"pay"}},
			When:    &engine.When{RateLimit: &engine.Limit{Max: max, Window: "1h", Per: engine.PerNamespace, Store: engine.StoreShared}}},
		{ID: "tip-per-namespace", Effect: "deny", Description: "tip is limited across the namespace, open when the store is down",
			Targets: &engine.Targets{Tools: []string{"tip"}},
			When:    &engine.When{RateLimit: &engine.Limit{Max: max, Window: "1h", Per: engine.PerNamespace, Store: engine.StoreShared, FailOpen: true}}},
		{ID: "lookup-per-agent", Effect: "deny", Description: "lookup is limited per agent, in each sidecar",
			Targets: &engine.Targets{Tools: []string{"lookup"}},
			When:    &engine.When{RateLimit: &engine.Limit{Max: max, Window: "1h"}}},
	}}}}
}

func writeBundle(t testing.TB, b engine.Bundle) string {
	t.Helper()
	doc, _ := testenv.Encode(t, b)
	path := filepath.Join(t.TempDir(), "bundle.json")
	if err := os.WriteFile(path, doc, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// proc is one `toolgate sidecar` process on a Unix socket.
type proc struct {
	t      testing.TB
	sock   string
	cmd    *exec.Cmd
	done   chan struct{}
	stderr *syncBuffer
	client *http.Client
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// launch starts a sidecar with args besides its socket, the bundle
// namespace and --decision-log=none, without waiting for it.
func launch(t testing.TB, args ...string) *proc {
	t.Helper()
	return launchBin(t, toolgateBin, args...)
}

// launchBin is launch with another toolgate binary (measure-limits'
// MEASURE_BASE).
func launchBin(t testing.TB, bin string, args ...string) *proc {
	t.Helper()
	dir, err := os.MkdirTemp("", "tg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	p := &proc{t: t, sock: filepath.Join(dir, "s.sock"), stderr: &syncBuffer{}, done: make(chan struct{})}
	all := []string{"sidecar", "--listen=unix://" + p.sock, "--decision-log=none"}
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--configmap") }) {
		// A file's bundle names its namespace; a ConfigMap's is its own.
		all = append(all, "--bundle-namespace="+namespace)
	}
	all = append(all, args...)
	p.cmd = exec.Command(bin, all...)
	p.cmd.Stderr = p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() {
			t.Logf("sidecar %s stderr:\n%s", p.sock, p.stderr.String())
		}
	})
	p.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", p.sock)
		}, MaxIdleConnsPerHost: 64}}
	return p
}

// stop ends the sidecar (SIGTERM) and waits until it has exited.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
}

// startSidecar launches a sidecar and waits until it is ready.
func startSidecar(t testing.TB, args ...string) *proc {
	t.Helper()
	return startSidecarBin(t, toolgateBin, args...)
}

// startSidecarBin is startSidecar with another toolgate binary.
func startSidecarBin(t testing.TB, bin string, args ...string) *proc {
	t.Helper()
	p := launchBin(t, bin, args...)
	waitFor(t, 20*time.Second, "the sidecar ready", func() bool {
		select {
		case <-p.done:
			t.Fatalf("the sidecar exited: %s\n%s", p.cmd.ProcessState, p.stderr.String())
		default:
		}
		_, err := sidecar.Probe(context.Background(), "unix:"+p.sock, "ready")
		return err == nil
	})
	return p
}

// exitError waits for a sidecar that must not start, and returns what it
// said on stderr.
func (p *proc) exitError(within time.Duration) string {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(within):
		p.t.Fatalf("the sidecar still runs after %v; want it to exit with an error\n%s", within, p.stderr.String())
	}
	if p.cmd.ProcessState.Success() {
		p.t.Fatalf("the sidecar exited 0; want an error\n%s", p.stderr.String())
	}
	return p.stderr.String()
}

// decision is the part of an answer the tests read.
type decision struct {
	Decision      engine.Decision `json:"decision"`
	Code          engine.Code     `json:"code"`
	Reason        string          `json:"reason"`
	MatchedRuleID *string         `json:"matchedRuleId"`
	Warnings      []string        `json:"warnings"`
}

func (d decision) rule() string {
	if d.MatchedRuleID == nil {
		return ""
	}
	return *d.MatchedRuleID
}

// decide asks the sidecar about tool for agent.
func (p *proc) decide(tool, agent string) (decision, error) {
	body := fmt.Sprintf(`{"tool_name":%q,"agent_id":%q}`, tool, agent)
	resp, err := p.client.Post("http://sidecar/v1/evaluate", "application/json", strings.NewReader(body))
	if err != nil {
		return decision{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return decision{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return decision{}, fmt.Errorf("%s: %s", resp.Status, data)
	}
	var d decision
	if err := json.Unmarshal(data, &d); err != nil {
		return decision{}, fmt.Errorf("%w: %s", err, data)
	}
	return d, nil
}

func (p *proc) mustDecide(tool, agent string) decision {
	p.t.Helper()
	d, err := p.decide(tool, agent)
	if err != nil {
		p.t.Fatal(err)
	}
	return d
}

// ready is the sidecar's /readyz status code and body.
func (p *proc) ready() (int, string) {
	p.t.Helper()
	resp, err := p.client.Get("http://sidecar/readyz")
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(data)
}

// metric is the value of the unlabelled sample name on /metrics, "" when
// absent.
func (p *proc) metric(name string) string {
	p.t.Helper()
	resp, err := p.client.Get("http://sidecar/metrics")
	if err != nil {
		p.t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return v
		}
	}
	return ""
}

// waitFor polls cond until it holds, failing the test past within.
func waitFor(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
