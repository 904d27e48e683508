package sidecar

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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/localcluster"
	"github.com/toolgate/toolgate/internal/mcptest"
	"github.com/toolgate/toolgate/internal/testenv"
	mcpproxy "github.com/toolgate/toolgate/mcp"
)

// The stdio wrapper's tests run it as the agent does: the real toolgate
// binary, started by the official SDK client's CommandTransport, in front
// of test/mcpserver speaking stdio; the sidecar (Run) decides.

var toolgateBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "toolgate-bin")
	if err != nil {
		return "", err
	}
	return localcluster.BuildToolgate(dir)
})

// stdioCommand is `toolgate mcp stdio` asking the sidecar at url, in front
// of the test server, whose call counts are served on statsAddr.
func stdioCommand(t *testing.T, url, statsAddr string, extra ...string) *exec.Cmd {
	t.Helper()
	return stdioGuardCommand(t, statsAddr, append([]string{"--url", url}, extra...)...)
}

// stdioGuardCommand is `toolgate mcp stdio --server pay` with flags, in
// front of the test server.
func stdioGuardCommand(t *testing.T, statsAddr string, flags ...string) *exec.Cmd {
	t.Helper()
	tg, err := toolgateBinary()
	if err != nil {
		t.Fatal(err)
	}
	server, err := mcptest.ServerBinary()
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"mcp", "stdio", "--server", "pay"}, flags...)
	args = append(args, "--", server, "-stdio", "-listen", statsAddr)
	cmd := exec.Command(tg, args...)
	cmd.Stderr = os.Stderr
	return cmd
}

func connectStdio(t *testing.T, cmd *exec.Cmd, version string) *mcp.ClientSession {
	t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "toolgate-test-agent", Version: "1.0.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("starting the server through toolgate mcp stdio: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func stdioServerCalls(t *testing.T, statsAddr string) map[string]int {
	t.Helper()
	status, body := get(t, "http://"+statsAddr+"/stats")
	if status != http.StatusOK {
		t.Fatalf("stats: %d %s", status, body)
	}
	var st upstreamStats
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatal(err)
	}
	return st.Calls
}

// TestMCPStdioDecidesCalls: allowed calls reach the server and answer;
// a call denied on its argument, a frozen agent's call and any call while
// the sidecar cannot be reached are answered by toolgate and never reach
// the server; every decision is the sidecar's, logged as an MCP call.
func TestMCPStdioDecidesCalls(t *testing.T) {
	for _, version := range []string{"2025-11-25", "2026-07-28"} {
		t.Run(version, func(t *testing.T) {
			rig := startMCPRig(t, "http://127.0.0.1:1/mcp", mcptest.Bundle(), nil) // its HTTP proxy is not used
			stats := testenv.FreeLoopbackAddr(t)
			cs := connectStdio(t, stdioCommand(t, rig.decisions, stats), version)

			if got := resultText(t, callTool(t, cs, "pay", map[string]any{"amount": 40})); got != "paid 40" {
				t.Fatalf("allowed pay answered %q, want paid 40", got)
			}
			d := deniedDecision(t, callTool(t, cs, "pay", map[string]any{"amount": 5000}), "pay-cap: payments over 100 need a human")
			if d["matchedRuleId"] != "pay-cap" {
				t.Fatalf("deny decision %v, want rule pay-cap", d)
			}
			if got := stdioServerCalls(t, stats)["pay"]; got != 1 {
				t.Fatalf("the server saw %d pay calls, want only the allowed one", got)
			}
			eventually(t, "both decisions are logged as the MCP calls they are", func() bool {
				seen := map[string]bool{}
				for _, l := range rig.logs.lines(t) {
					req, _ := l["request"].(map[string]any)
					input, _ := req["input"].(map[string]any)
					session, _ := l["session_id"].(string)
					if l["tool_name"] == "pay" && l["framework"] == "mcp" && l["agent_id"] == mcptest.Agent &&
						req["server"] == "pay" && req["action"] == "call" && strings.HasPrefix(session, "stdio-") {
						seen[fmt.Sprintf("%v %v", l["decision"], input["amount"])] = true
					}
				}
				return seen["allow 40"] && seen["deny 5000"]
			})

			frozen := mcptest.Bundle()
			frozen.FrozenAgents = []engine.FrozenAgent{{ID: mcptest.Agent, Reason: "INC-21: looping on payments"}}
			rig.publish(frozen)
			deniedDecision(t, callTool(t, cs, "read_file", map[string]any{"path": "/etc/motd"}), "AGENT_FROZEN: INC-21: looping on payments")
			rig.publish(mcptest.Bundle())
			if got := resultText(t, callTool(t, cs, "read_file", map[string]any{"path": "/etc/motd"})); got != "contents of /etc/motd" {
				t.Fatalf("after the unfreeze read_file answered %q", got)
			}

			// No sidecar to ask: denied, fail closed, never forwarded.
			down := testenv.FreeLoopbackAddr(t)
			stats2 := testenv.FreeLoopbackAddr(t)
			cs2 := connectStdio(t, stdioCommand(t, "http://"+down, stats2, "--timeout", "500ms"), version)
			res := callTool(t, cs2, "read_file", map[string]any{"path": "/etc/motd"})
			if !res.IsError || !strings.HasPrefix(resultText(t, res), "SIDECAR_UNAVAILABLE: ") || !strings.Contains(resultText(t, res), "denied (fail closed)") {
				t.Fatalf("with no sidecar: %+v", res)
			}
			if got := stdioServerCalls(t, stats2); len(got) != 0 {
				t.Fatalf("the server saw %v with no sidecar to decide", got)
			}
		})
	}
}

// TestMCPStdioRefusesWhatItCannotRead: messages toolgate cannot read
// unambiguously, batches holding a call and over-long lines are answered
// with a JSON-RPC error and never reach the server; what follows is read
// as usual; the wrapper exits with the server's status.
func TestMCPStdioRefusesWhatItCannotRead(t *testing.T) {
	rig := startMCPRig(t, "http://127.0.0.1:1/mcp", mcptest.Bundle(), nil)
	stats := testenv.FreeLoopbackAddr(t)
	cmd := stdioCommand(t, rig.decisions, stats)
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	outPipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(outPipe)
	answer := func(send string) map[string]any {
		t.Helper()
		if _, err := io.WriteString(in, send+"\n"); err != nil {
			t.Fatal(err)
		}
		line, err := out.ReadBytes('\n')
		if err != nil {
			t.Fatalf("no answer to %.80s: %v", send, err)
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("answer %s: %v", line, err)
		}
		return m
	}
	errorOf := func(m map[string]any) (code float64, msg string) {
		e, _ := m["error"].(map[string]any)
		code, _ = e["code"].(float64)
		msg, _ = e["message"].(string)
		return code, msg
	}
	for _, c := range []struct {
		name, send string
		id         any
		code       float64
		want       string
	}{
		{"not JSON", `not json`, nil, mcpproxy.RPCInvalidRequest, "not JSON-RPC toolgate can read unambiguously"},
		{"case-variant key", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","Name":"pay","arguments":{"amount":5000}}}`, nil, mcpproxy.RPCInvalidRequest, "not JSON-RPC toolgate can read unambiguously"},
		{"duplicate argument", `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"pay","arguments":{"amount":5,"amount":5000}}}`, nil, mcpproxy.RPCInvalidRequest, "not JSON-RPC toolgate can read unambiguously"},
		{"batch with a call", `[{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"pay","arguments":{"amount":5}}}]`, nil, mcpproxy.RPCInvalidRequest, "a batch holding tools/call"},
		{"params not an object", `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":["pay"]}`, float64(4), mcpproxy.RPCInvalidParams, "params must be an object with a string name"},
		{"over-long line", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"pay","arguments":{"note":"` + strings.Repeat("x", mcpproxy.MaxStdioLine) + `"}}}`, nil, mcpproxy.RPCInvalidRequest, fmt.Sprintf("more than %d bytes", mcpproxy.MaxStdioLine)},
	} {
		m := answer(c.send)
		code, msg := errorOf(m)
		if m["id"] != c.id || code != c.code || !strings.Contains(msg, c.want) || !strings.Contains(msg, "not forwarded") {
			t.Errorf("%s: answered %v, want error %v %q for id %v", c.name, m, c.code, c.want, c.id)
		}
	}
	// Read as usual after all that: the server answers initialize.
	init := answer(`{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
	if init["id"] != float64(9) || init["result"] == nil {
		t.Fatalf("initialize after the refusals: %v", init)
	}
	if got := stdioServerCalls(t, stats); len(got) != 0 {
		t.Fatalf("the server saw calls %v", got)
	}
	// The agent closes its end: the server's input ends, it exits 0, and
	// so does the wrapper.
	_ = in.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the wrapper exited with %v after the agent closed its input", err)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the wrapper did not exit after the agent closed its input")
	}
}

// TestMCPStdioDecidesLocally: with --bundle-dir there is no sidecar to
// ask: the same answers, from the file; a freeze written to it takes effect
// while the server runs; a corrupt rewrite keeps the last good policies;
// each deny is said on stderr, since no sidecar logs it.
func TestMCPStdioDecidesLocally(t *testing.T) {
	dir := t.TempDir()
	bundleFile := filepath.Join(dir, "bundle.json")
	write := func(doc []byte) {
		t.Helper()
		must(t, os.WriteFile(bundleFile+".tmp", doc, 0o644))
		must(t, os.Rename(bundleFile+".tmp", bundleFile))
	}
	doc, _ := encode(t, mcptest.Bundle())
	write(doc)
	stats := testenv.FreeLoopbackAddr(t)
	cmd := stdioGuardCommand(t, stats, "--bundle-dir", bundleFile, "--agent-id", mcptest.Agent)
	stderr, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = stderr.Close() }()
	cmd.Stderr = stderr
	cs := connectStdio(t, cmd, "2025-11-25")

	if got := resultText(t, callTool(t, cs, "pay", map[string]any{"amount": 40})); got != "paid 40" {
		t.Fatalf("allowed pay answered %q, want paid 40", got)
	}
	deniedDecision(t, callTool(t, cs, "pay", map[string]any{"amount": 5000}), "pay-cap: payments over 100 need a human")
	if got := stdioServerCalls(t, stats)["pay"]; got != 1 {
		t.Fatalf("the server saw %d pay calls, want only the allowed one", got)
	}

	frozen := mcptest.Bundle()
	frozen.FrozenAgents = []engine.FrozenAgent{{ID: mcptest.Agent, Reason: "INC-22: stop"}}
	doc, _ = encode(t, frozen)
	write(doc)
	testenv.Eventually(t, "the freeze written to --bundle-dir denies", func() (bool, string) {
		res := callTool(t, cs, "read_file", map[string]any{"path": "/etc/motd"})
		return res.IsError, fmt.Sprintf("%+v", res)
	})
	write([]byte(`{"policies": [`))
	testenv.Eventually(t, "the corrupt rewrite is reported", func() (bool, string) {
		b, _ := os.ReadFile(stderr.Name())
		return strings.Contains(string(b), "the last good policies keep deciding"), string(b)
	})
	deniedDecision(t, callTool(t, cs, "read_file", map[string]any{"path": "/etc/motd"}), "AGENT_FROZEN: INC-22: stop")
	b, _ := os.ReadFile(stderr.Name())
	for _, want := range []string{"toolgate denied pay: rule pay-cap (policy payments)", "toolgate denied read_file: AGENT_FROZEN: INC-22: stop"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("stderr lacks %q:\n%s", want, b)
		}
	}
}

// TestMCPStdioAnswersConcurrentCalls runs the guard in process (so `go
// test -race` sees it) in front of the real test server over stdio, the
// SDK client on its pipes and the engine deciding: calls in flight at once
// get each its own answer, whether the server's or the guard's deny, every
// line whole.
func TestMCPStdioAnswersConcurrentCalls(t *testing.T) {
	server, err := mcptest.ServerBinary()
	if err != nil {
		t.Fatal(err)
	}
	compiled, diags := engine.Compile(mcptest.Bundle())
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	decide := func(_ context.Context, doc []byte) (engine.Result, []byte) {
		req, err := engine.DecodeRequest(doc)
		if err != nil {
			t.Errorf("the guard's request does not decode: %v\n%s", err, doc)
			return engine.Result{Decision: engine.Deny}, nil
		}
		res := compiled.Evaluate(req, engine.EvalOptions{})
		decision, _ := res.AppendJSON(nil)
		return res, decision
	}
	toGuard, agentOut := io.Pipe()
	agentIn, fromGuard := io.Pipe()
	stats := testenv.FreeLoopbackAddr(t)
	exited := make(chan int, 1)
	go func() {
		code, err := mcpproxy.RunStdio(context.Background(), mcpproxy.StdioOptions{Server: "pay", Command: []string{server, "-stdio", "-listen", stats}, Decide: decide},
			toGuard, fromGuard, os.Stderr)
		if err != nil {
			t.Errorf("RunStdio: %v", err)
		}
		_ = fromGuard.Close()
		exited <- code
	}()
	c := mcp.NewClient(&mcp.Implementation{Name: "toolgate-test-agent", Version: "1.0.0"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.IOTransport{Reader: agentIn, Writer: agentOut}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			amount := 10 + i
			if i%2 == 1 {
				amount = 1000 + i
			}
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "pay", Arguments: map[string]any{"amount": amount}})
			if err != nil {
				t.Errorf("pay %d: %v", amount, err)
				return
			}
			text := ""
			if len(res.Content) == 1 {
				if tc, ok := res.Content[0].(*mcp.TextContent); ok {
					text = tc.Text
				}
			}
			want := fmt.Sprintf("paid %d", amount)
			if i%2 == 1 {
				want = "pay-cap: payments over 100 need a human"
			}
			if text != want || res.IsError != (i%2 == 1) {
				t.Errorf("pay %d answered %q (isError %v), want %q", amount, text, res.IsError, want)
			}
		}()
	}
	wg.Wait()
	if got := stdioServerCalls(t, stats)["pay"]; got != 8 {
		t.Errorf("the server saw %d pay calls, want the 8 allowed", got)
	}
	_ = cs.Close()
	select {
	case code := <-exited:
		if code != 0 {
			t.Errorf("the server exited %d after the agent left", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("RunStdio did not return after the agent left")
	}
}
