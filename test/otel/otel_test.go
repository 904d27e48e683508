// Package otel checks toolgate's OpenTelemetry spans against a real OTLP
// receiver: the OpenTelemetry Collector's own otlpreceiver, run in the
// test process, is what the sidecar's OTLP/HTTP exporter sends to. It is a
// module of its own, as test/promql is for Prometheus, so that the
// Collector is no dependency of toolgate.
package otel

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/collector/pdata/ptrace"
)

// The caller's trace: what an agent's own tracer would send.
const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
)

var bin struct{ toolgate, mcpserver string }

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "toolgate-otel-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	bin.toolgate, bin.mcpserver = filepath.Join(dir, "toolgate"), filepath.Join(dir, "mcpserver")
	// The binaries users run, built from this checkout.
	build := exec.Command("go", "build", "-o", dir+"/", "./cmd/toolgate", "./test/mcpserver")
	build.Dir = "../.."
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building toolgate and test/mcpserver:", err)
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

const policy = `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata:
  name: files
spec:
  rules:
  - id: no-delete
    description: files are never deleted by an agent
    effect: deny
    conditions:
    - {field: tool_name, operator: eq, value: delete_file}
`

// sidecar is a running toolgate sidecar process.
type sidecar struct {
	url, mcp string
}

// startSidecar runs `toolgate sidecar` on the policy above with env added
// to its environment, and an MCP upstream when upstream is not "".
func startSidecar(t *testing.T, env []string, upstream string) *sidecar {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(policy), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin.toolgate, "bundle", "-f", dir, "-n", "agents").Output()
	if err != nil {
		t.Fatalf("toolgate bundle: %v", err)
	}
	bundle := filepath.Join(dir, "bundle.json")
	if err := os.WriteFile(bundle, out, 0o600); err != nil {
		t.Fatal(err)
	}
	s := &sidecar{url: "http://" + freeAddr(t)}
	args := []string{"sidecar", "--bundle-file", bundle, "--listen", strings.TrimPrefix(s.url, "http://")}
	if upstream != "" {
		mcpAddr := freeAddr(t)
		s.mcp = "http://" + mcpAddr + "/mcp/files"
		args = append(args, "--mcp-upstream", "files="+upstream, "--mcp-listen", mcpAddr)
	}
	cmd := exec.Command(bin.toolgate, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// SIGTERM, so it flushes its last spans as it exits.
		_ = cmd.Process.Signal(os.Interrupt)
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(s.url + "/readyz")
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return s
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the sidecar at %s is not ready after 30s (last: %v)", s.url, err)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition: readiness
	}
}

// tracingEnv points the sidecar's exporter at rec, with a short batch
// delay so a test does not wait the default 5 s for its spans.
func tracingEnv(rec *receiver) []string {
	return []string{
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + rec.endpoint,
		"OTEL_BSP_SCHEDULE_DELAY=50",
		"OTEL_RESOURCE_ATTRIBUTES=deployment.environment.name=otel-test",
	}
}

// TestDecisionSpanUnderCallersTraceparent: /v1/evaluate with a traceparent
// makes one toolgate.decision span in the caller's trace, child of the
// caller's span, saying what the decision log says: rule, effect,
// decision, code, policy and version, bundle revision.
func TestDecisionSpanUnderCallersTraceparent(t *testing.T) {
	rec := startReceiver(t)
	s := startSidecar(t, tracingEnv(rec), "")
	// Ten decisions first, without a traceparent: the checked one's id
	// then has two digits, whose base the span must write as the answer.
	for range 10 {
		resp, err := http.Post(s.url+"/v1/evaluate", "application/json", strings.NewReader(`{"tool_name":"read_file"}`))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
	}
	req, _ := http.NewRequest(http.MethodPost, s.url+"/v1/evaluate",
		strings.NewReader(`{"tool_name":"delete_file","agent_id":"files-agent","input":{"path":"/etc/passwd"}}`))
	req.Header.Set("traceparent", "00-"+callerTrace+"-"+callerSpan+"-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	var answer struct {
		Decision, Code, MatchedRuleID, BundleRevision, DecisionID string
	}
	if err := json.Unmarshal(body, &answer); err != nil || answer.Decision != "deny" || answer.MatchedRuleID != "no-delete" {
		t.Fatalf("answer %s (%v), want deny by no-delete", body, err)
	}
	spans := rec.await(t, callerTrace, "toolgate.decision span", func(s []span) bool { return len(named(s, "toolgate.decision")) > 0 })
	if len(spans) != 1 {
		t.Fatalf("the caller's trace holds %d spans, want the decision's alone: %+v", len(spans), spans)
	}
	d := spans[0]
	if d.parentSpanID != callerSpan {
		t.Errorf("decision span's parent %q, want the caller's span %s", d.parentSpanID, callerSpan)
	}
	if d.service != "toolgate-sidecar" || d.resource["deployment.environment.name"] != "otel-test" {
		t.Errorf("resource %v, want service.name toolgate-sidecar and OTEL_RESOURCE_ATTRIBUTES'", d.resource)
	}
	want := map[string]any{
		"toolgate.decision": "deny", "toolgate.effect": "deny",
		"toolgate.rule_id": "no-delete", "toolgate.policy_id": "files", "toolgate.policy_version": int64(1),
		"toolgate.bundle_revision": answer.BundleRevision, "toolgate.tool_name": "delete_file",
		"toolgate.decision_id": answer.DecisionID,
	}
	if answer.Code != "" {
		want["toolgate.code"] = answer.Code // the answer's code, when it has one
	} else if c, ok := d.attrs["toolgate.code"]; ok {
		t.Errorf("attribute toolgate.code = %#v, but the answer has no code", c)
	}
	for k, v := range want {
		if d.attrs[k] != v {
			t.Errorf("attribute %s = %#v, want %#v (all: %v)", k, d.attrs[k], v, d.attrs)
		}
	}
	if !d.end.After(d.start) {
		t.Errorf("span from %v to %v: want a duration", d.start, d.end)
	}
}

// traceparentTransport is an agent's HTTP client that sends its own
// traceparent with every request, as an instrumented agent does.
type traceparentTransport struct{ traceparent string }

func (tr traceparentTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("traceparent", tr.traceparent)
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPCallSpans: a tools/call through the MCP proxy, from the official
// MCP Go SDK's client, makes a toolgate.mcp.call span under the agent's
// traceparent with the decision and the round trip upstream as its
// children; a denied call has the decision and no upstream span. The
// upstream (test/mcpserver) is sent a traceparent naming the upstream
// span, so its own spans would continue the trace beneath it.
func TestMCPCallSpans(t *testing.T) {
	rec := startReceiver(t)
	up := startMCPServer(t)
	s := startSidecar(t, tracingEnv(rec), up+"/mcp")

	const allowedTrace, deniedTrace = "5bf92f3577b34da6a3ce929d0e0e4736", "6bf92f3577b34da6a3ce929d0e0e4736"
	call := func(trace, tool string, args map[string]any) *mcp.CallToolResult {
		hc := &http.Client{Transport: traceparentTransport{"00-" + trace + "-" + callerSpan + "-01"}}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		client := mcp.NewClient(&mcp.Implementation{Name: "otel-test-agent", Version: "1.0.0"}, nil)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: s.mcp, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true}, nil)
		if err != nil {
			t.Fatalf("connecting through the proxy: %v", err)
		}
		defer cs.Close()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			t.Fatalf("calling %s: %v", tool, err)
		}
		return res
	}

	if res := call(allowedTrace, "pay", map[string]any{"amount": 5}); res.IsError {
		t.Fatalf("pay was refused: %+v", res)
	}
	spans := rec.await(t, allowedTrace, "tools/call span with its decision and upstream", func(s []span) bool {
		c := callSpan(s, "pay")
		return c != nil && len(childrenOf(s, c.spanID)) == 2
	})
	c := callSpan(spans, "pay")
	if c.parentSpanID != callerSpan || c.kind != ptrace.SpanKindServer {
		t.Errorf("call span's parent %q kind %v, want the agent's span %s, server", c.parentSpanID, c.kind, callerSpan)
	}
	if c.attrs["toolgate.mcp.upstream"] != "files" || c.attrs["toolgate.mcp.outcome"] != "forwarded" {
		t.Errorf("call span attributes %v, want upstream files, outcome forwarded", c.attrs)
	}
	kids := childrenOf(spans, c.spanID)
	dec, upstream := named(kids, "toolgate.decision"), named(kids, "toolgate.mcp.upstream")
	if len(dec) != 1 || len(upstream) != 1 {
		t.Fatalf("call span's children %+v, want one toolgate.decision and one toolgate.mcp.upstream", kids)
	}
	if dec[0].attrs["toolgate.decision"] != "allow" || dec[0].attrs["toolgate.tool_name"] != "pay" {
		t.Errorf("decision span attributes %v, want allow of pay", dec[0].attrs)
	}
	if upstream[0].kind != ptrace.SpanKindClient || upstream[0].start.Before(dec[0].end) {
		t.Errorf("upstream span %+v: want a client span begun after the decision (ended %v)", upstream[0], dec[0].end)
	}
	// What the upstream was sent: the trace continues under the upstream span.
	if got, want := upstreamTraceparents(t, up), "00-"+allowedTrace+"-"+upstream[0].spanID+"-01"; !slices.Contains(got, want) {
		t.Errorf("the upstream was sent traceparents %q, none %q (the upstream span)", got, want)
	}

	res := call(deniedTrace, "delete_file", map[string]any{"path": "/etc/passwd"})
	if !res.IsError {
		t.Fatalf("delete_file was not denied: %+v", res)
	}
	spans = rec.await(t, deniedTrace, "denied tools/call span with its decision", func(s []span) bool {
		c := callSpan(s, "delete_file")
		return c != nil && len(childrenOf(s, c.spanID)) > 0
	})
	c = callSpan(spans, "delete_file")
	kids = childrenOf(spans, c.spanID)
	if len(kids) != 1 || kids[0].name != "toolgate.decision" || kids[0].attrs["toolgate.rule_id"] != "no-delete" ||
		kids[0].attrs["toolgate.decision"] != "deny" {
		t.Errorf("denied call's children %+v, want only its decision, deny by no-delete", kids)
	}
	if c.attrs["toolgate.mcp.outcome"] != "denied" {
		t.Errorf("denied call span attributes %v, want outcome denied", c.attrs)
	}
}

// callSpan is the tools/call span of tool, nil when none.
func callSpan(spans []span, tool string) *span {
	for i, s := range spans {
		if s.name == "toolgate.mcp.call" && s.attrs["mcp.method.name"] == "tools/call" && s.attrs["gen_ai.tool.name"] == tool {
			return &spans[i]
		}
	}
	return nil
}

func childrenOf(spans []span, parent string) []span {
	var out []span
	for _, s := range spans {
		if s.parentSpanID == parent {
			out = append(out, s)
		}
	}
	return out
}

// startMCPServer runs test/mcpserver on loopback and returns its base URL.
func startMCPServer(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(bin.mcpserver, "-listen", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
	if err != nil || !ok {
		t.Fatalf("test/mcpserver said %q (%v), want listening on ADDR", line, err)
	}
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return "http://" + addr
}

// upstreamTraceparents are the traceparents test/mcpserver was sent (its
// /stats).
func upstreamTraceparents(t *testing.T, base string) []string {
	t.Helper()
	resp, err := http.Get(base + "/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Traceparent []string `json:"traceparent"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatalf("test/mcpserver /stats: %v", err)
	}
	return st.Traceparent
}

// TestStdioGuardSpans: `toolgate mcp stdio` in front of a server over
// stdio, asking a traced sidecar, makes a toolgate.mcp.call span for each
// tools/call it decides, and the sidecar's decision span is its child in
// the same trace: the guard sends the sidecar its span as traceparent.
// The agent is the official MCP Go SDK's client, starting the guard as an
// agent's MCP configuration would.
func TestStdioGuardSpans(t *testing.T) {
	rec := startReceiver(t)
	s := startSidecar(t, tracingEnv(rec), "")
	cmd := exec.Command(bin.toolgate, "mcp", "stdio", "--server", "files", "--url", s.url, "--", bin.mcpserver, "-stdio")
	cmd.Env = append(os.Environ(), tracingEnv(rec)...)
	cmd.Stderr = os.Stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "otel-test-agent", Version: "1.0.0"}, nil)
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("starting the guard: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": "/etc/passwd"}})
	if err != nil || !res.IsError {
		t.Fatalf("delete_file: %+v, %v; want denied", res, err)
	}
	guard := func(s span) bool { return s.service == "toolgate-mcp-stdio" || s.service == "toolgate-sidecar" }
	spans := rec.awaitWhere(t, "the guard's and the sidecar's spans", guard, "stdio call span with the sidecar's decision under it", func(s []span) bool {
		c := callSpan(s, "delete_file")
		return c != nil && len(childrenOf(s, c.spanID)) > 0
	})
	c := callSpan(spans, "delete_file")
	if c.service != "toolgate-mcp-stdio" || c.attrs["toolgate.mcp.upstream"] != "files" || c.attrs["toolgate.mcp.outcome"] != "denied" {
		t.Errorf("call span %+v: want toolgate-mcp-stdio's, server files, outcome denied", c)
	}
	kids := childrenOf(spans, c.spanID)
	if len(kids) != 1 || kids[0].name != "toolgate.decision" || kids[0].service != "toolgate-sidecar" || kids[0].traceID != c.traceID ||
		kids[0].attrs["toolgate.rule_id"] != "no-delete" {
		t.Errorf("call span's children %+v: want the sidecar's decision, deny by no-delete, in the call's trace", kids)
	}
}
