package sidecar

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/mcptest"
	mcpproxy "github.com/toolgate/toolgate/mcp"
)

// The MCP end-to-end tests run three real parties: the MCP server in
// test/mcpserver (the official Go SDK) as its own process, the whole
// sidecar (Run) as the proxy, and the official SDK client as the agent.

const (
	mcpAgent       = mcptest.Agent
	upstreamSecret = "Bearer upstream-secret-7f3a"
)

// mcpUpstreamProc is the MCP server process.
type mcpUpstreamProc struct {
	base string // http://127.0.0.1:PORT
	cmd  *exec.Cmd
	done chan struct{}
}

func startMCPServer(t testing.TB) *mcpUpstreamProc {
	t.Helper()
	bin, err := mcptest.ServerBinary()
	if err != nil {
		t.Fatal(err)
	}
	return startMCPServerBinary(t, bin)
}

// startMCPServerBinary runs an MCP server binary that prints "listening on
// ADDR" and serves /stats (test/mcpserver, test/mcpgoserver).
func startMCPServerBinary(t testing.TB, bin string) *mcpUpstreamProc {
	t.Helper()
	return startUpstream(t, bin, "-listen", "127.0.0.1:0")
}

// startUpstream runs an MCP server process that prints "listening on
// ADDR" and answers GET /stats (test/mcpserver, test/upstreams).
func startUpstream(t testing.TB, argv ...string) *mcpUpstreamProc {
	t.Helper()
	cmd := exec.Command(argv[0], argv[1:]...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &mcpUpstreamProc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(p.stop)
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
	}()
	select {
	case l, ok := <-line:
		addr, found := strings.CutPrefix(l, "listening on ")
		if !ok || !found {
			t.Fatalf("%s said %q, want listening on ADDR", argv[0], l)
		}
		p.base = "http://" + addr
	case <-time.After(30 * time.Second):
		t.Fatalf("%s did not start listening", argv[0])
	}
	return p
}

// endpoint is the server's MCP URL for a protocol version: the SDK serves
// 2026-07-28 only statelessly.
func (p *mcpUpstreamProc) endpoint(version string) string {
	if version >= "2026-07-28" {
		return p.base + "/mcp-stateless"
	}
	return p.base + "/mcp"
}

func (p *mcpUpstreamProc) stop() {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

type upstreamStats struct {
	Calls         map[string]int `json:"calls"`
	Authorization []string       `json:"authorization"`
}

func (p *mcpUpstreamProc) stats(t testing.TB) upstreamStats {
	t.Helper()
	status, body := get(t, p.base+"/stats")
	if status != http.StatusOK {
		t.Fatalf("stats: %d %s", status, body)
	}
	var st upstreamStats
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func (p *mcpUpstreamProc) release(t testing.TB) {
	t.Helper()
	if status, body := post(t, p.base+"/release", ""); status != http.StatusOK {
		t.Fatalf("release: %d %s", status, body)
	}
}

// mcpRig is a sidecar proxying one upstream, "pay", from a bundle file the
// test rewrites.
type mcpRig struct {
	t          *testing.T
	bundleFile string
	decisions  string // the sidecar's decision listener
	proxy      string // http://ADDR/mcp/pay
	logs       *lineBuffer
	// noStandaloneSSE: connect opens no GET stream.
	noStandaloneSSE bool
	// dial, when set, is how the agent's client connects.
	dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

func startMCPRig(t *testing.T, upstreamURL string, b engine.Bundle, edit func(*Options)) *mcpRig {
	t.Helper()
	dir := t.TempDir()
	r := &mcpRig{t: t, bundleFile: filepath.Join(dir, "bundle.json"), logs: &lineBuffer{}}
	r.writeBundle(b)
	o := testOptions()
	o.BundleFile = r.bundleFile
	o.PollInterval = 50 * time.Millisecond
	o.AgentID = mcpAgent
	o.DecisionLog = DecisionLogStdout
	o.DecisionLogWriter = r.logs
	o.LogFields = []string{"server", "action", "input"}
	o.MCP.Listen = "127.0.0.1:0"
	o.MCP.Upstreams = []string{"pay=" + upstreamURL}
	addr := make(chan net.Addr, 1)
	o.MCP.OnListen = func(a net.Addr) { addr <- a }
	if edit != nil {
		edit(&o)
	}
	r.decisions = startRun(t, o)
	r.proxy = "http://" + (<-addr).String() + "/mcp/pay"
	eventually(t, "the sidecar loads the bundle", func() bool { return readyRevision(t, r.decisions) != "" })
	return r
}

func (r *mcpRig) writeBundle(b engine.Bundle) string {
	r.t.Helper()
	doc, rev := encode(r.t, b)
	tmp := r.bundleFile + ".tmp"
	must(r.t, os.WriteFile(tmp, doc, 0o644))
	must(r.t, os.Rename(tmp, r.bundleFile))
	return rev
}

// publish writes b and waits until the sidecar serves it.
func (r *mcpRig) publish(b engine.Bundle) {
	r.t.Helper()
	rev := r.writeBundle(b)
	eventually(r.t, "the sidecar serves the new bundle", func() bool { return readyRevision(r.t, r.decisions) == rev })
}

// recordingTransport remembers every header value the agent's client
// received, to prove the upstream credential never reaches the agent.
type recordingTransport struct {
	base http.RoundTripper
	mu   sync.Mutex
	seen []string
	// agentAuth, when set, is the Authorization the agent sends (the
	// proxy must replace it).
	agentAuth string
}

func (rt *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if rt.agentAuth != "" {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", rt.agentAuth)
	}
	resp, err := rt.base.RoundTrip(req)
	if resp != nil {
		rt.mu.Lock()
		for k, vs := range resp.Header {
			rt.seen = append(rt.seen, k+": "+strings.Join(vs, ","))
		}
		rt.mu.Unlock()
	}
	return resp, err
}

func (rt *recordingTransport) headers() string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return strings.Join(rt.seen, "\n")
}

// connect opens an SDK client session through the proxy at version.
func (r *mcpRig) connect(version string, opts *mcp.ClientOptions, tr *recordingTransport) *mcp.ClientSession {
	r.t.Helper()
	hc := &http.Client{}
	base := http.DefaultTransport
	if r.dial != nil {
		base = &http.Transport{DialContext: r.dial}
	}
	hc.Transport = base
	if tr != nil {
		tr.base = base
		hc.Transport = tr
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "toolgate-test-agent", Version: "1.0.0"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.proxy, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: r.noStandaloneSSE},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		r.t.Fatalf("connecting through the proxy at %s: %v", version, err)
	}
	r.t.Cleanup(func() { _ = cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		r.t.Fatalf("negotiated protocol version %s, want %s", got, version)
	}
	return cs
}

func callTool(t testing.TB, cs *mcp.ClientSession, name string, args map[string]any) *mcp.CallToolResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("calling %s: %v", name, err)
	}
	return res
}

func resultText(t testing.TB, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("result holds %d contents, want 1: %+v", len(res.Content), res)
	}
	tc, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("result content is %T, want text", res.Content[0])
	}
	return tc.Text
}

// deniedDecision checks res is a toolgate deny and returns its decision.
func deniedDecision(t testing.TB, res *mcp.CallToolResult, wantText string) map[string]any {
	t.Helper()
	if !res.IsError {
		t.Fatalf("result is not an error: %+v", res)
	}
	if got := resultText(t, res); got != wantText {
		t.Fatalf("deny text %q, want %q", got, wantText)
	}
	d, ok := res.Meta[mcpproxy.MetaDecision].(map[string]any)
	if !ok {
		t.Fatalf("no decision under _meta[%q]: %+v", mcpproxy.MetaDecision, res.Meta)
	}
	if d["decision"] != "deny" || d["decisionId"] == "" || d["bundleRevision"] == nil {
		t.Fatalf("decision object %v, want a deny with its id and revision", d)
	}
	return d
}

var mcpVersions = []string{"2025-11-25", "2026-07-28"}
