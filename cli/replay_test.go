package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/toolgate/toolgate/internal/exitcode"
	"github.com/toolgate/toolgate/internal/testenv"
)

// denyReadPolicy is a candidate change: Read, allowed today, denied.
const denyReadPolicy = `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: no-reads}
spec:
  priority: 1000
  rules:
  - id: no-read
    effect: deny
    conditions:
    - {field: tool_name, operator: eq, value: Read}
`

// recordDecisionLog runs a real sidecar on the samples' bundle with its
// decision log on stdout (request fields kept with --log-fields), sends it
// bodies, and returns its log lines.
func recordDecisionLog(t *testing.T, bodies []string) string {
	t.Helper()
	dir := t.TempDir()
	b := run(t, "", "bundle", "-f", samplesDir)
	if b.code != 0 {
		t.Fatalf("bundle: exit %d: %s", b.code, b.stderr)
	}
	bundleFile := filepath.Join(dir, "bundle.json")
	if err := os.WriteFile(bundleFile, []byte(b.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := testenv.FreeLoopbackAddr(t)
	sidecar := exec.Command(toolgateBinary(t), "sidecar", "--bundle-file", bundleFile, "--decision-log", "stdout",
		"--log-fields", "input,kwargs,roles,side_effect", "--listen", addr)
	logFile, err := os.Create(filepath.Join(dir, "decisions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logFile.Close() }()
	sidecar.Stdout = logFile
	if err := sidecar.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = sidecar.Wait(); close(exited) }()
	t.Cleanup(func() { _ = sidecar.Process.Signal(syscall.SIGKILL); <-exited })
	testenv.Eventually(t, "the sidecar is ready", func() (bool, string) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	for _, body := range bodies {
		resp, err := http.Post("http://"+addr+"/v1/evaluate", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %s", body, resp.Status)
		}
	}
	var log string
	testenv.Eventually(t, "every decision logged", func() (bool, string) {
		data, _ := os.ReadFile(logFile.Name())
		log = string(data)
		n := strings.Count(log, "\n")
		return n == len(bodies), fmt.Sprintf("%d of %d lines", n, len(bodies))
	})
	return log
}

// TestReplayRedecidesARealSidecarsLog: what a real sidecar logged,
// replayed against the manifests it served, changes nothing; against a
// candidate that denies Read, exactly the Read calls change, grouped by
// the rule that would deny them, with examples.
func TestReplayRedecidesARealSidecarsLog(t *testing.T) {
	log := recordDecisionLog(t, []string{
		`{"tool_name":"Read","agent_id":"coder-1","session_id":"s1","input":{"file_path":"/workspace/a"}}`,
		`{"tool_name":"Read","agent_id":"coder-2","input":{"file_path":"/workspace/b"}}`,
		`{"tool_name":"Read","agent_id":"Billing-Bot-7","input":{"file_path":"/workspace/c"}}`,
		`{"tool_name":"Bash","agent_id":"coder-1","input":{"command":"rm -rf /"}}`,
		`{"tool_name":"Bash","agent_id":"coder-1","input":{"command":"git status"}}`,
		`{"tool_name":"pay","agent_id":"coder-1","kwargs":{"amount":5000}}`,
		`{"tool_name":"pay","agent_id":"coder-1","kwargs":{"amount":50}}`,
	})
	logPath := filepath.Join(t.TempDir(), "decisions.jsonl")
	if err := os.WriteFile(logPath, []byte(log), 0o644); err != nil {
		t.Fatal(err)
	}

	same := run(t, "", "replay", "-f", samplesDir, logPath, "--fail-on-change")
	if same.code != 0 || same.stdout != "7 decisions replayed, 0 would change\n" {
		t.Fatalf("against what it served: exit %d, stdout %q, stderr %q", same.code, same.stdout, same.stderr)
	}

	candidate := testenv.WriteTree(t, map[string]string{"no-reads.yaml": denyReadPolicy})
	o := run(t, log, "replay", "-f", samplesDir, "-f", candidate, "-o", "json", "--examples", "1")
	if o.code != 0 {
		t.Fatalf("exit %d: %s", o.code, o.stderr)
	}
	var report struct {
		Replayed, Changed, WithoutRequest int
		Groups                            []struct {
			From, To, Rule, Was string
			Count               int
			Examples            []struct{ DecisionID, ToolName, AgentID string }
		}
	}
	if err := json.Unmarshal([]byte(o.stdout), &report); err != nil {
		t.Fatalf("-o json: %v: %s", err, o.stdout)
	}
	// Billing-Bot-7 is frozen: its Read stays denied, by AGENT_FROZEN.
	if report.Replayed != 7 || report.Changed != 2 || report.WithoutRequest != 0 || len(report.Groups) != 1 {
		t.Fatalf("report %+v", report)
	}
	g := report.Groups[0]
	if g.From != "allow" || g.To != "deny" || g.Rule != "no-read" || g.Was != "read-only-tools" || g.Count != 2 ||
		len(g.Examples) != 1 || g.Examples[0].ToolName != "Read" || g.Examples[0].AgentID != "coder-1" || g.Examples[0].DecisionID == "" {
		t.Errorf("group %+v", g)
	}

	gate := run(t, log, "replay", "-f", samplesDir, "-f", candidate, "--fail-on-change")
	if gate.code != exitcode.Problems || !strings.HasPrefix(gate.stdout, "7 decisions replayed, 2 would change\n  allow -> deny by no-read (before: read-only-tools): 2\n") {
		t.Errorf("--fail-on-change: exit %d, stdout %q", gate.code, gate.stdout)
	}
}

// TestReplayCountsLimitsOverTheLog: a rate limit added by the candidate
// counts the calls the log holds, at their recorded times, per agent.
func TestReplayCountsLimitsOverTheLog(t *testing.T) {
	limit := `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: limits}
spec:
  rules:
  - id: two-a-minute
    effect: deny
    when: {rateLimit: {max: 2, window: 1m, per: agent}}
`
	line := func(sec int, agent string) string {
		return fmt.Sprintf(`{"time":"2030-01-01T10:00:%02dZ","decision_id":"d-%d","session_id":null,"agent_id":%q,"tool_name":"Read","decision":"allow","effect":"allow","matched_policy_id":null,"matched_policy_version":null,"matched_rule_id":null,"bundle_revision":null,"latency_ms":0.01}`, sec, sec, agent)
	}
	// Out of order in the file: replay sorts by time.
	log := strings.Join([]string{line(3, "a"), line(1, "a"), line(2, "a"), line(4, "b"), line(5, "a")}, "\n") + "\n"
	dir := testenv.WriteTree(t, map[string]string{"limits.yaml": limit})
	o := run(t, log, "replay", "-f", dir)
	want := "5 decisions replayed, 2 would change\n  allow -> deny by two-a-minute (before: the default): 2\n" +
		"    2030-01-01T10:00:03Z d-3 Read agent=a\n    2030-01-01T10:00:05Z d-5 Read agent=a\n" +
		"note: 5 line(s) held no request fields (the sidecar logs them with --log-fields): rules on input, args or kwargs saw them absent\n"
	if o.code != 0 || o.stdout != want {
		t.Errorf("exit %d, stdout:\n%s\nwant:\n%s\nstderr %s", o.code, o.stdout, want, o.stderr)
	}
}

// TestReplayRefusesUnreadableInput: a line that is not a decision is an
// error naming the file and line (a replay that skipped it would report
// fewer changes); nothing is reported.
func TestReplayRefusesUnreadableInput(t *testing.T) {
	good := `{"time":"2030-01-01T10:00:00Z","decision_id":"d-1","session_id":null,"agent_id":"a","tool_name":"Read","decision":"allow","effect":"allow","matched_rule_id":null}`
	policies := testenv.WriteTree(t, map[string]string{"p.yaml": fmt.Sprintf(denyBashPolicy, "")})
	for _, c := range []struct{ name, line, want string }{
		{"not JSON", "level=info msg=started", ":2: not a JSON object"},
		{"an array", `[1]`, ":2: not a JSON object: the request must be a JSON object, not an array"},
		{"no time", `{"tool_name":"Read","decision":"allow"}`, `:2: time "" is not an RFC 3339 time: is this a toolgate decision log?`},
		{"no tool_name", `{"time":"2030-01-01T10:00:00Z","decision":"allow"}`, ":2: tool_name is missing"},
		{"odd decision", `{"time":"2030-01-01T10:00:00Z","tool_name":"Read","decision":"maybe"}`, `:2: decision "maybe" is neither allow, deny nor ask`},
		{"request not an object", `{"time":"2030-01-01T10:00:00Z","tool_name":"Read","decision":"allow","request":[1]}`, ":2: request: not a JSON object"},
		{"request misspelt", `{"time":"2030-01-01T10:00:00Z","tool_name":"Read","decision":"allow","request":{"agentId":"x"}}`, `:2: request: bad request: unknown field "agentId"`},
		{"time a number", `{"time":1,"tool_name":"Read","decision":"allow"}`, ":2: time must be a string, not a number: is this a toolgate decision log?"},
		{"too wide", `{"time":"2030-01-01T10:00:00Z","tool_name":"Read","decision":"allow","request":{"input":[` + strings.Repeat("0,", 30000) + `0]}}`, ":2: not a JSON object: too many JSON values"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "log.jsonl")
			if err := os.WriteFile(path, []byte(good+"\n"+c.line+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			o := run(t, "", "replay", "-f", policies, path)
			if o.code != exitcode.Usage || o.stdout != "" || !strings.Contains(o.stderr, path+c.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 with %q", o.code, o.stdout, o.stderr, path+c.want)
			}
		})
	}
	for _, c := range []struct {
		stdin string
		args  []string
		want  string
	}{
		{"", []string{"replay", "-f", policies, "/nonexistent/log.jsonl"}, "/nonexistent/log.jsonl: cannot read: no such file or directory"},
		{"", []string{"replay", "-f", "-"}, "-f - and the log cannot both read stdin"},
		{"", []string{"replay", "-f", policies, "--examples", "-1"}, "--examples must be 0 or more, not -1"},
		{"", []string{"replay", "/dev/null"}, "-f PATH is required"},
		{"", []string{"replay", "-f", policies, "-o", "xml"}, "-o must be one of text, json, yaml"},
		{"not a log\n", []string{"replay", "-f", policies}, "<stdin>:1: not a JSON object"},
	} {
		if o := run(t, c.stdin, c.args...); o.code != exitcode.Usage || !strings.Contains(o.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 with %q", c.args, o.code, o.stderr, c.want)
		}
	}
	// An empty log replays nothing, and says so.
	if o := run(t, "", "replay", "-f", policies, "/dev/null"); o.code != 0 || o.stdout != "0 decisions replayed, 0 would change\n" {
		t.Errorf("empty log: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
}
