package sidecar

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/mcptest"
)

// Issue 24 §3: the agent resets or starves its own limits. These tests run
// the sidecar as its own process (this test binary re-executed as the real
// `toolgate sidecar` command, see TestHelperProcess) and play the agent
// over its Unix socket, as an injected Pod's containers reach it.

// sidecarProc is a sidecar process on a Unix socket.
type sidecarProc struct {
	t    *testing.T
	args []string
	sock string
	cmd  *exec.Cmd
	done chan struct{}
	logs *lineBuffer
	// out is the process's stdout: its decision log with
	// --decision-log=stdout.
	out *lineBuffer
}

// startSidecarProc starts the sidecar with args (--listen is added: a
// socket in a directory of its own) and waits until it is ready.
func startSidecarProc(t *testing.T, args ...string) *sidecarProc {
	t.Helper()
	dir, err := os.MkdirTemp("", "tg-")
	must(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	p := &sidecarProc{t: t, sock: filepath.Join(dir, "s.sock")}
	p.args = append([]string{"--listen=unix://" + p.sock}, args...)
	p.start()
	t.Cleanup(func() { p.stop(syscall.SIGTERM) })
	return p
}

func (p *sidecarProc) start() {
	p.t.Helper()
	p.cmd = helperProcess(p.t, os.Args[0], "sidecar", map[string]string{"TOOLGATE_TEST_ARGS": strings.Join(p.args, "\n")})
	p.logs, p.out = &lineBuffer{}, &lineBuffer{}
	p.cmd.Stderr, p.cmd.Stdout = p.logs, p.out
	must(p.t, p.cmd.Start())
	p.done = make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	eventually(p.t, "the sidecar process ready on its socket", func() bool {
		select {
		case <-p.done:
			p.t.Fatalf("the sidecar process exited: %s\n%s", p.cmd.ProcessState, p.logs.String())
		default:
		}
		_, err := Probe(p.t.Context(), "unix:"+p.sock, "ready")
		return err == nil
	})
}

// stop ends the process with sig (SIGKILL: as the kernel's OOM killer or a
// kubelet past its grace period would) and waits for it.
func (p *sidecarProc) stop(sig syscall.Signal) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(sig)
	<-p.done
}

// restart stops the process with sig and starts it again, same arguments.
func (p *sidecarProc) restart(sig syscall.Signal) {
	p.t.Helper()
	p.stop(sig)
	p.start()
}

func (p *sidecarProc) client() *http.Client { return unixClient(p.sock) }

// decide asks the sidecar over its socket.
func (p *sidecarProc) decide(c *http.Client, body string) decisionResponse {
	p.t.Helper()
	resp, err := c.Post("http://sidecar/v1/evaluate", "application/json", strings.NewReader(body))
	must(p.t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	must(p.t, err)
	if resp.StatusCode != http.StatusOK {
		p.t.Fatalf("%d %s", resp.StatusCode, data)
	}
	return decodeDecision(p.t, data)
}

// writeBundleFile writes b where a sidecar's --bundle-file reads it.
func writeBundleFile(t *testing.T, b engine.Bundle) string {
	t.Helper()
	doc, _ := encode(t, b)
	path := filepath.Join(t.TempDir(), "bundle.json")
	must(t, os.WriteFile(path, doc, 0o644))
	return path
}

// The eviction attack, over /v1/evaluate: the agent spends its pay limit,
// makes 1,100 allowed calls with fresh session ids of its choosing, which
// on a ledger of 1,024 keys kept least recently used pushed its pay counter
// out, and pays again.
func TestAttackFreshSessionIdsDoNotResetTheAgentsRateLimit(t *testing.T) {
	p := startSidecarProc(t, "--bundle-file="+writeBundleFile(t, limitsBundle()), "--agent-id=shop-agent", "--decision-log=none")
	c := p.client()
	pay := `{"tool_name":"pay","session_id":"s-0"}`
	for i := range 10 {
		if d := p.decide(c, pay); d.Decision != engine.Allow {
			t.Fatalf("pay %d: %+v", i+1, d.Result)
		}
	}
	if d := p.decide(c, pay); d.MatchedRuleID != "pay-hourly" {
		t.Fatalf("the 11th pay: %+v, want deny by pay-hourly", d.Result)
	}
	for i := range 1100 {
		if d := p.decide(c, fmt.Sprintf(`{"tool_name":"Read","session_id":"fresh-%d"}`, i)); d.Decision != engine.Allow {
			t.Fatalf("Read in fresh session %d: %+v", i, d.Result)
		}
	}
	if d := p.decide(c, `{"tool_name":"pay","session_id":"fresh-1100"}`); d.Decision != engine.Deny || d.MatchedRuleID != "pay-hourly" {
		t.Fatalf("pay after 1,100 fresh sessions: %+v, want deny by pay-hourly: the agent reset its own rate limit", d.Result)
	}
}

// The same attack through the MCP proxy on the socket, against the real
// MCP server (official Go SDK, stateless, which ignores Mcp-Session-Id):
// the fresh session ids are Mcp-Session-Id headers, and what counts is how
// many pay calls the server ran.
func TestAttackFreshMcpSessionIdsDoNotResetTheAgentsRateLimit(t *testing.T) {
	up := startMCPServer(t)
	b := mcptest.Bundle()
	b.Policies[0].Rules = append(b.Policies[0].Rules, engine.Rule{ID: "pay-thrice-hourly", Effect: "deny", Description: "three payments an hour",
		Targets: &engine.Targets{Tools: []string{"pay"}}, When: &engine.When{RateLimit: &engine.Limit{Max: 3, Window: "1h"}}})
	p := startSidecarProc(t, "--bundle-file="+writeBundleFile(t, b), "--agent-id="+mcpAgent, "--decision-log=none",
		"--mcp-listen=127.0.0.1:0", "--mcp-upstream=pay="+up.endpoint("2026-07-28"))
	c := p.client()
	call := func(tool, args, session string) string {
		t.Helper()
		body := callBody(tool, args)
		req, err := http.NewRequest(http.MethodPost, "http://sidecar/mcp/pay", strings.NewReader(body))
		must(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		req.Header.Set("Mcp-Method", "tools/call")
		req.Header.Set("Mcp-Name", tool)
		req.Header.Set("Mcp-Session-Id", session)
		resp, err := c.Do(req)
		must(t, err)
		defer resp.Body.Close()
		data, err := io.ReadAll(resp.Body)
		must(t, err)
		return string(data)
	}
	for i := range 3 {
		if got := call("pay", `{"amount":1}`, "s-0"); !strings.Contains(got, "paid 1") {
			t.Fatalf("pay %d: %s", i+1, got)
		}
	}
	if got := call("pay", `{"amount":1}`, "s-0"); !strings.Contains(got, "pay-thrice-hourly") {
		t.Fatalf("the 4th pay: %s, want denied by pay-thrice-hourly", got)
	}
	for i := range 1100 {
		if got := call("read_file", `{"path":"/tmp/x"}`, fmt.Sprint("fresh-", i)); strings.Contains(got, `"isError":true`) {
			t.Fatalf("read_file in fresh session %d: %s", i, got)
		}
	}
	got := call("pay", `{"amount":1}`, "fresh-1100")
	if n := up.stats(t).Calls["pay"]; n != 3 {
		t.Fatalf("the MCP server ran pay %d times, want 3 (the last answer: %s)", n, got)
	}
	if !strings.Contains(got, "pay-thrice-hourly") {
		t.Errorf("pay after 1,100 fresh sessions: %s, want denied by pay-thrice-hourly", got)
	}
}

// A sidecar restart, by SIGKILL (the OOM killer, kubelet past its grace
// period) or SIGTERM, keeps every count: --usage-state is in the sidecar's
// own volume, and each call counted is in it before it is answered.
func TestARestartOfTheSidecarProcessKeepsTheCount(t *testing.T) {
	state := filepath.Join(t.TempDir(), "usage")
	p := startSidecarProc(t, "--bundle-file="+writeBundleFile(t, limitsBundle()), "--agent-id=shop-agent", "--decision-log=none",
		"--usage-state="+state)
	pay := `{"tool_name":"pay"}`
	for i := range 6 {
		if d := p.decide(p.client(), pay); d.Decision != engine.Allow {
			t.Fatalf("pay %d: %+v", i+1, d.Result)
		}
	}
	p.restart(syscall.SIGKILL)
	for i := 6; i < 10; i++ {
		if d := p.decide(p.client(), pay); d.Decision != engine.Allow {
			t.Fatalf("pay %d after a SIGKILL: %+v", i+1, d.Result)
		}
	}
	if d := p.decide(p.client(), pay); d.MatchedRuleID != "pay-hourly" {
		t.Fatalf("the 11th pay, after a SIGKILL: %+v, want deny by pay-hourly", d.Result)
	}
	p.restart(syscall.SIGTERM)
	if d := p.decide(p.client(), pay); d.MatchedRuleID != "pay-hourly" {
		t.Fatalf("pay after a SIGTERM: %+v, want deny by pay-hourly", d.Result)
	}
	if !strings.Contains(p.logs.String(), "usage counters restored") {
		t.Errorf("the restart did not log the counters it restored:\n%s", p.logs.String())
	}
}

// A state file that cannot be read is never read as zero: the sidecar
// starts, says so, keeps the file aside, and denies every limited call
// whose window reaches back before its start USAGE_UNAVAILABLE; calls no
// limit reads are decided as ever.
func TestAnUnreadableUsageStateFailsClosed(t *testing.T) {
	state := filepath.Join(t.TempDir(), "usage")
	must(t, os.WriteFile(state, []byte("toolgate usage state v1\n\x10\x00\x00\x00garbage"), 0o600))
	b := limitsBundle()
	b.Policies[0].Rules = b.Policies[0].Rules[:3] // without the token budget, which every call reads
	p := startSidecarProc(t, "--bundle-file="+writeBundleFile(t, b), "--agent-id=shop-agent", "--decision-log=none",
		"--usage-state="+state)
	c := p.client()
	d := p.decide(c, `{"tool_name":"pay"}`)
	if d.Decision != engine.Deny || d.Code != CodeUsageUnavailable {
		t.Fatalf("pay after an unreadable state file: %+v, want deny %s", d.Result, CodeUsageUnavailable)
	}
	t.Logf("pay: %s", d.Reason)
	if d := p.decide(c, `{"tool_name":"Read"}`); d.Decision != engine.Allow {
		t.Errorf("Read, which no limit reads: %+v", d.Result)
	}
	if _, err := os.Stat(state + ".unreadable"); err != nil {
		t.Errorf("the unreadable file was not kept aside: %v", err)
	}
	if logs := p.logs.String(); !strings.Contains(logs, "the usage state file could not be read") {
		t.Errorf("the sidecar did not say the state file was unreadable:\n%s", logs)
	}
	// It stays so across a restart within the window.
	p.restart(syscall.SIGKILL)
	if d := p.decide(p.client(), `{"tool_name":"pay"}`); d.Code != CodeUsageUnavailable {
		t.Errorf("pay after a restart: %+v, want deny %s still", d.Result, CodeUsageUnavailable)
	}
}

// A ledger full of counters that limits still read denies a call it cannot
// count USAGE_UNAVAILABLE, as a real process over the socket: never allows
// it uncounted, and never forgets the agent's pay counter to make room.
func TestAFullLedgerDeniesUsageUnavailable(t *testing.T) {
	p := startSidecarProc(t, "--bundle-file="+writeBundleFile(t, limitsBundle()), "--agent-id=shop-agent", "--decision-log=none",
		"--usage-max-keys=8")
	c := p.client()
	for range 10 {
		p.decide(c, `{"tool_name":"pay","session_id":"s"}`)
	}
	var denied decisionResponse
	for i := range 8 {
		d := p.decide(c, fmt.Sprintf(`{"tool_name":"tool-%d","session_id":"s"}`, i))
		if d.Decision == engine.Deny {
			denied = d
			break
		}
	}
	if denied.Code != CodeUsageUnavailable {
		t.Fatalf("eight new tools in a ledger of 8 counters were all allowed, or denied otherwise (%+v): want deny %s", denied.Result, CodeUsageUnavailable)
	}
	t.Logf("denied: %s", denied.Reason)
	if d := p.decide(c, `{"tool_name":"pay","session_id":"s"}`); d.MatchedRuleID != "pay-hourly" {
		t.Errorf("pay in the full ledger: %+v, want deny by pay-hourly", d.Result)
	}
	_, metrics := getOver(t, c, "http://sidecar/metrics")
	if !strings.Contains(metrics, `toolgate_sidecar_decisions_total{code="USAGE_UNAVAILABLE",decision="deny",effect="deny"}`) {
		t.Errorf("/metrics does not count the USAGE_UNAVAILABLE deny")
	}
}

// getOver GETs url with c.
func getOver(t *testing.T, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	must(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	must(t, err)
	return resp.StatusCode, string(data)
}
