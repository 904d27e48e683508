package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/exitcode"
	"github.com/toolgate/toolgate/internal/testenv"
)

const historyNow = "2030-01-31T10:00:00Z"

// payHistory is n pay calls by agent bot, one a minute, the last at end.
func payHistory(n int, end time.Time) string {
	var entries []string
	for i := range n {
		at := end.Add(-time.Duration(n-1-i) * time.Minute)
		entries = append(entries, fmt.Sprintf(`{"time":%q,"agent_id":"bot","session_id":"s%d","tool_name":"pay","tokens":10}`,
			at.Format(time.RFC3339Nano), i%2))
	}
	return "[" + strings.Join(entries, ",\n") + "]"
}

// limitBundle denies pay at 10 calls an hour per agent, and any call over
// 95 tokens an hour per session.
func limitBundle(t *testing.T) *engine.Compiled {
	t.Helper()
	c, diags := engine.Compile(engine.Bundle{Policies: []engine.Policy{{ID: "limits", Version: 1, DefaultEffect: "allow", Rules: []engine.Rule{
		{ID: "pay-hourly", Effect: "deny", Targets: &engine.Targets{Tools: []string{"pay"}},
			When: &engine.When{RateLimit: &engine.Limit{Max: 10, Window: "1h", Per: engine.PerAgent}}},
		{ID: "session-budget", Effect: "deny",
			When: &engine.When{TokenBudget: &engine.Limit{Max: 95, Window: "1h", Per: engine.PerSession}}},
	}}}})
	if len(diags) > 0 {
		t.Fatalf("compile: %+v", diags)
	}
	return c
}

// TestHistoryIsReplayedAsTheSidecarCounts: the calls of a history count
// as a sidecar that allowed them counts, judged at --now.
func TestHistoryIsReplayedAsTheSidecarCounts(t *testing.T) {
	now, _ := time.Parse(time.RFC3339, historyNow)
	c := limitBundle(t)
	decide := func(history string, req engine.Request) engine.Result {
		t.Helper()
		l, err := readHistory(writeFile(t, history), nil, now)
		if err != nil {
			t.Fatal(err)
		}
		return c.Evaluate(req, engine.EvalOptions{Now: func() time.Time { return now }, Usage: l})
	}
	pay := engine.Request{"tool_name": "pay", "agent_id": "BOT", "session_id": "s9"}
	for _, tc := range []struct {
		name    string
		history string
		req     engine.Request
		rule    string
	}{
		{"9 calls in the hour", payHistory(9, now), pay, ""},
		{"10 calls in the hour (agent ids fold)", payHistory(10, now), pay, "pay-hourly"},
		{"the oldest of 10 exactly an hour before --now is out", payHistory(10, now.Add(9*time.Minute-time.Hour)), pay, ""},
		{"a nanosecond later it is in", payHistory(10, now.Add(9*time.Minute-time.Hour+1)), pay, "pay-hourly"},
		{"another tool", payHistory(10, now), engine.Request{"tool_name": "Read", "agent_id": "bot", "session_id": "s9"}, ""},
		{"another agent", payHistory(10, now), engine.Request{"tool_name": "pay", "agent_id": "bot-2", "session_id": "s9"}, ""},
		// Session s0 holds 5 of the 10 calls: 50 tokens; 46 more is 96.
		{"a session's tokens over budget", payHistory(10, now),
			engine.Request{"tool_name": "Read", "agent_id": "x", "session_id": "s0", "tokens": 46.0}, "session-budget"},
		{"a session's tokens at budget", payHistory(10, now),
			engine.Request{"tool_name": "Read", "agent_id": "x", "session_id": "s0", "tokens": 45.0}, ""},
		{"an unsorted file", reversed(t, payHistory(10, now)), pay, "pay-hourly"},
		{"JSON Lines, as logs are kept", asLines(t, payHistory(10, now)), pay, "pay-hourly"},
		{"9 JSON Lines", asLines(t, payHistory(9, now)), pay, ""},
		{"an empty history", `[]`, pay, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := decide(tc.history, tc.req)
			if res.MatchedRuleID != tc.rule {
				t.Errorf("%+v, want rule %q", res, tc.rule)
			}
		})
	}
}

func reversed(t *testing.T, history string) string {
	t.Helper()
	var entries []json.RawMessage
	if err := json.Unmarshal([]byte(history), &entries); err != nil {
		t.Fatal(err)
	}
	for i, j := 0, len(entries)-1; i < j; i, j = i+1, j-1 {
		entries[i], entries[j] = entries[j], entries[i]
	}
	b, _ := json.Marshal(entries)
	return string(b)
}

// asLines is a JSON array history as JSON Lines.
func asLines(t *testing.T, history string) string {
	t.Helper()
	var entries []json.RawMessage
	if err := json.Unmarshal([]byte(history), &entries); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		b.Write(e)
		b.WriteString("\n")
	}
	return b.String()
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	dir := testenv.WriteTree(t, map[string]string{"history.json": content})
	return filepath.Join(dir, "history.json")
}

// TestEvalHistoryIsAccepted: a well-formed history (from a file or stdin)
// leaves a decision that counts nothing as it was.
func TestEvalHistoryIsAccepted(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"p.yaml": fmt.Sprintf(denyBashPolicy, ""), "req.json": `{"tool_name":"Read"}`,
		"history.json": payHistory(3, time.Date(2030, 1, 31, 9, 0, 0, 0, time.UTC))})
	p, req := filepath.Join(dir, "p.yaml"), filepath.Join(dir, "req.json")
	res := oneResult(t, run(t, "", "eval", "-f", p, "--request", req, "--history", filepath.Join(dir, "history.json"), "--now", historyNow))
	if res.Decision != engine.Allow || res.Effect != engine.EffectAllow {
		t.Errorf("%+v", res)
	}
	res = oneResult(t, run(t, `[{"time":"2030-01-31T09:00:00Z","tool_name":"pay"}]`, "eval", "-f", p, "--request", req, "--history", "-", "--now", historyNow))
	if res.Decision != engine.Allow {
		t.Errorf("history from stdin: %+v", res)
	}
}

// TestEvalHistoryErrors: every malformed history exits 2, naming the file
// and the entry.
func TestEvalHistoryErrors(t *testing.T) {
	files := map[string]string{
		"p.yaml": fmt.Sprintf(denyBashPolicy, ""), "req.json": `{"tool_name":"Read"}`,
		"object.json":     "{\n  \"time\": \"2030-01-31T09:00:00Z\",\n  \"tool_name\": \"pay\"\n}\n",
		"lines.jsonl":     "{\"time\":\"2030-01-31T09:00:00Z\",\"tool_name\":\"pay\"}\n\n{\"time\":\"2030-01-31T09:00:00Z\",\"tool_name\":\"pay\",\"tokenz\":5}\n",
		"string.json":     `"calls"`,
		"null.json":       `null`,
		"empty.json":      ``,
		"broken.json":     `[{"time":"2030-01-31T09:00:00Z","tool_name":"pay"},]`,
		"badtime.json":    `[{"time":"yesterday","tool_name":"pay"}]`,
		"nozone.json":     `[{"time":"2030-01-31T09:00:00","tool_name":"pay"}]`,
		"numtime.json":    `[{"time":1893445200,"tool_name":"pay"}]`,
		"notime.json":     `[{"tool_name":"pay"}]`,
		"notool.json":     `[{"time":"2030-01-31T09:00:00Z"}]`,
		"unknown.json":    `[{"time":"2030-01-31T09:00:00Z","tool_name":"pay"},{"time":"2030-01-31T09:00:00Z","tool_name":"pay","tokenz":5}]`,
		"negative.json":   `[{"time":"2030-01-31T09:00:00Z","tool_name":"pay","tokens":-1}]`,
		"strtokens.json":  `[{"time":"2030-01-31T09:00:00Z","tool_name":"pay","tokens":"5"}]`,
		"numagent.json":   `[{"time":"2030-01-31T09:00:00Z","tool_name":"pay","agent_id":7}]`,
		"nullentry.json":  `[null]`,
		"strentry.json":   `["pay"]`,
		"future.json":     `[{"time":"2030-01-31T10:00:01Z","tool_name":"pay"}]`,
		"trailing.json":   `[] []`,
		"nestedtime.json": `[{"time":{"at":"2030-01-31T09:00:00Z"},"tool_name":"pay"}]`,
	}
	dir := testenv.WriteTree(t, files)
	p := func(name string) string { return filepath.Join(dir, name) }
	for _, tc := range []struct{ file, stdin, want string }{
		// JSON Lines: one call per line, errors by line.
		{"object.json", "", "line 1: not a JSON object on one line (JSON Lines: one call per line)"},
		{"lines.jsonl", "", `line 3: json: unknown field "tokenz"`},
		{"string.json", "", "it is a JSON string"},
		{"null.json", "", "it is null"},
		{"empty.json", "", "not a JSON array"},
		{"broken.json", "", "not a JSON array"},
		{"trailing.json", "", "not a JSON array"},
		{"badtime.json", "", `entry 0: time "yesterday" is not an RFC 3339 time`},
		{"nozone.json", "", `entry 0: time "2030-01-31T09:00:00" is not an RFC 3339 time`},
		{"numtime.json", "", "entry 0: json: cannot unmarshal number"},
		{"nestedtime.json", "", "entry 0: json: cannot unmarshal object"},
		{"notime.json", "", "entry 0: time is required"},
		{"notool.json", "", "entry 0: tool_name is required"},
		{"unknown.json", "", `entry 1: json: unknown field "tokenz"`},
		{"negative.json", "", "entry 0: tokens is -1: a call consumes 0 or more"},
		{"strtokens.json", "", "entry 0: json: cannot unmarshal string"},
		{"numagent.json", "", "entry 0: json: cannot unmarshal number"},
		{"nullentry.json", "", "entry 0: null, not an object"},
		{"strentry.json", "", "entry 0: json: cannot unmarshal string"},
		{"future.json", "", "entry 0: time 2030-01-31T10:00:01Z is after --now (2030-01-31T10:00:00Z)"},
		{"missing.json", "", "--history " + p("missing.json") + ": cannot read"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			o := run(t, tc.stdin, "eval", "-f", p("p.yaml"), "--request", p("req.json"), "--history", p(tc.file), "--now", historyNow)
			if o.code != exitcode.Usage || o.stdout != "" {
				t.Errorf("exit %d, stdout %q; want %d and nothing", o.code, o.stdout, exitcode.Usage)
			}
			if !strings.Contains(o.stderr, "--history "+p(tc.file)+": ") || !strings.Contains(o.stderr, tc.want) {
				t.Errorf("stderr:\n%s\nwant the file and %q", o.stderr, tc.want)
			}
		})
	}
	o := run(t, "[]", "eval", "-f", p("p.yaml"), "--request", "-", "--history", "-")
	if o.code != exitcode.Usage || !strings.Contains(o.stderr, "--request - and --history - cannot both read stdin") {
		t.Errorf("two readers of stdin: exit %d, stderr %q", o.code, o.stderr)
	}
}
