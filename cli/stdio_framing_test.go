package cli

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A Policy denying delete_file, for the stdio guard in front of the
// Python-like server.
const noDeletePolicy = `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata:
  name: files
spec:
  rules:
  - id: no-delete
    description: files are never deleted by agents
    effect: deny
    conditions:
    - {field: tool_name, operator: eq, value: delete_file}
`

// pythonStdio is `toolgate mcp stdio --bundle-dir` (policies: dir) in front
// of testdata/mcp_python_stdio.py, which reads stdin as the Python SDK does
// and appends what it runs to the returned ledger file. send writes one
// raw line; until reads the answers up to the one with id want.
type pythonStdio struct {
	t      *testing.T
	in     io.WriteCloser
	out    *bufio.Reader
	ledger string
}

func startPythonStdio(t *testing.T, policy string) *pythonStdio {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 runs the Python-like MCP server: %v", err)
	}
	dir := t.TempDir()
	mustDo(t, os.WriteFile(filepath.Join(dir, "policy.yaml"), []byte(policy), 0o600))
	ledger := filepath.Join(t.TempDir(), "ledger")
	mustDo(t, os.WriteFile(ledger, nil, 0o600))
	server, err := filepath.Abs("testdata/mcp_python_stdio.py")
	mustDo(t, err)
	cmd := exec.Command(toolgateBinary(t), "mcp", "stdio", "--server", "files", "--bundle-dir", dir, "--", python, server, ledger)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	mustDo(t, err)
	out, err := cmd.StdoutPipe()
	mustDo(t, err)
	mustDo(t, cmd.Start())
	t.Cleanup(func() {
		_ = in.Close()
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	return &pythonStdio{t: t, in: in, out: bufio.NewReader(out), ledger: ledger}
}

func (p *pythonStdio) send(line string) {
	p.t.Helper()
	if _, err := io.WriteString(p.in, line); err != nil {
		p.t.Fatal(err)
	}
}

// until reads answers until the one whose id is want (a JSON number),
// returning every answer read, in order.
func (p *pythonStdio) until(want float64) []map[string]any {
	p.t.Helper()
	var got []map[string]any
	for {
		line, err := p.out.ReadBytes('\n')
		if err != nil {
			p.t.Fatalf("no answer with id %v (read %v): %v", want, got, err)
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			p.t.Fatalf("answer %q: %v", line, err)
		}
		got = append(got, m)
		if m["id"] == want {
			return got
		}
	}
}

// ran is what the server ran, in order: "METHOD NAME" for tools/call,
// "METHOD" for the rest.
func (p *pythonStdio) ran() []string {
	p.t.Helper()
	b, err := os.ReadFile(p.ledger)
	mustDo(p.t, err)
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var m struct {
			Method string         `json:"method"`
			Params map[string]any `json:"params"`
		}
		mustDo(p.t, json.Unmarshal([]byte(line), &m))
		if m.Method == "tools/call" {
			args, _ := m.Params["arguments"].(map[string]any)
			out = append(out, m.Method+" "+m.Params["name"].(string)+" "+args["path"].(string))
			continue
		}
		out = append(out, m.Method)
	}
	return out
}

// TestMCPStdioRefusesCarriageReturnsPythonSplitsAt: the Python SDK reads
// stdin in universal-newlines mode, so a bare "\r" ends a line there while
// the guard reads to "\n". A notification whose params hold a tools/call
// between two bare "\r"s is one JSON message to the guard (the "\r"s are
// whitespace) and three lines to the server, the middle one a call it runs.
// The guard refuses the line, with a JSON-RPC error, and the denied call
// never runs; CRLF line ends, and U+2028 or U+0085 inside strings (which
// TextIOWrapper does not split at) pass as before.
func TestMCPStdioRefusesCarriageReturnsPythonSplitsAt(t *testing.T) {
	p := startPythonStdio(t, noDeletePolicy)
	p.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}` + "\r\n")
	if init := p.until(1); init[0]["result"] == nil {
		t.Fatalf("initialize: %v", init)
	}
	p.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")

	// The attack: delete_file is denied, and hidden in a notification.
	smuggled := `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/srv/prod.db"}}}`
	p.send(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"t","progress":1,"note":` + "\r" + smuggled + "\r" + `}}` + "\n")
	// A ping after it: its answer comes after anything the line caused.
	p.send(`{"jsonrpc":"2.0","id":3,"method":"ping"}` + "\n")
	answers := p.until(3)
	refused := false
	for _, a := range answers {
		if a["id"] == float64(2) {
			t.Errorf("the smuggled call was answered: %v", a)
		}
		e, _ := a["error"].(map[string]any)
		msg, _ := e["message"].(string)
		if a["id"] == nil && e["code"] == float64(-32600) && strings.Contains(msg, `"\r"`) && strings.Contains(msg, "not forwarded") {
			refused = true
		}
	}
	if !refused {
		t.Errorf("the line with bare carriage returns got no JSON-RPC error saying why: %v", answers)
	}
	for _, r := range p.ran() {
		if strings.HasPrefix(r, "tools/call delete_file") || r == "notifications/progress" {
			t.Fatalf("the server ran %q from the line holding bare carriage returns; it ran %v", r, p.ran())
		}
	}

	// Strings holding U+2028 and U+0085, raw: one line to TextIOWrapper
	// too, decided and run as one call.
	p.send(`{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"a` + "\u2028" + `b` + "\u0085" + `c"}}}` + "\r\n")
	if got := p.until(4); got[len(got)-1]["result"] == nil {
		t.Fatalf("a call with U+2028 and U+0085 in a string: %v", got)
	}
	// The same call denied when sent plainly: the policy is in force.
	p.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/srv/prod.db"}}}` + "\n")
	got := p.until(5)
	if res, _ := got[len(got)-1]["result"].(map[string]any); res["isError"] != true {
		t.Fatalf("delete_file sent plainly: %v", got)
	}
	var calls []string
	for _, r := range p.ran() {
		if strings.HasPrefix(r, "tools/call") {
			calls = append(calls, r)
		}
	}
	if len(calls) != 1 || calls[0] != "tools/call read_file a\u2028b\u0085c" {
		t.Fatalf("the server ran calls %q, want only read_file with the path whole", calls)
	}
}

func mustDo(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
