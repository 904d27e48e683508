package mcp

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
)

// The stdio guard's result path against a server process (sh) that
// answers every line with the answer the test gives, and a judge that
// finds "AKIA" keys to redact and denies "SECRET": what the guard does
// with each verdict, a malformed result and a line past the limit. The
// engine's verdicts end to end: sidecar TestMCPStdioJudgesResultsLocally.

// keyJudge redacts every AKIA key of 20 bytes in output.text and denies a
// text holding SECRET; truncated, it decides as if both matched. It
// records what it was asked.
type keyJudge struct {
	mu        sync.Mutex
	asked     []map[string]any
	truncated []bool
}

func (k *keyJudge) judge(_ context.Context, doc []byte, truncated bool) (engine.Result, []byte) {
	var req map[string]any
	if err := json.Unmarshal(doc, &req); err != nil {
		return engine.Result{Decision: engine.Deny, Effect: engine.EffectDeny, Reason: err.Error()}, nil
	}
	k.mu.Lock()
	k.asked, k.truncated = append(k.asked, req), append(k.truncated, truncated)
	k.mu.Unlock()
	text, _ := req["output"].(map[string]any)["text"].(string)
	if truncated || strings.Contains(text, "SECRET") {
		return engine.Result{Decision: engine.Deny, Effect: engine.EffectDeny, MatchedRuleID: "no-secret", Reason: "secrets stay put"}, nil
	}
	res := engine.Result{Decision: engine.Allow, Effect: engine.EffectAllow}
	for at := 0; ; {
		i := strings.Index(text[at:], "AKIA")
		if i < 0 || at+i+20 > len(text) {
			break
		}
		res.Redactions = append(res.Redactions, engine.Redaction{Start: at + i, End: at + i + 20, RuleID: "aws-key"})
		at += i + 20
	}
	if res.Redactions != nil {
		res.Effect, res.MatchedRuleID = engine.EffectRedact, "aws-key"
	}
	return res, nil
}

// stdioAnswering runs the guard in front of a server answering every
// line with answer (its "ID" the line's id as sent is not read: tests
// send id 1), and returns the agent's ends.
func stdioAnswering(t *testing.T, answer string, judge ResultJudge, maxResult int) (io.Writer, *bufio.Reader) {
	t.Helper()
	toGuard, agentOut := io.Pipe()
	agentIn, fromGuard := io.Pipe()
	allow := func(context.Context, []byte) (engine.Result, []byte) {
		return engine.Result{Decision: engine.Allow, Effect: engine.EffectAllow}, nil
	}
	file := t.TempDir() + "/answer"
	must(t, os.WriteFile(file, []byte(answer+"\n"), 0o644))
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := RunStdio(context.Background(), StdioOptions{Server: "files", Decide: allow, Judge: judge, MaxResultBytes: maxResult,
			Command: []string{"sh", "-c", `while IFS= read -r l; do cat "$0"; done`, file}}, toGuard, fromGuard, os.Stderr)
		if err != nil {
			t.Errorf("RunStdio: %v", err)
		}
		_ = fromGuard.Close()
	}()
	br := bufio.NewReaderSize(agentIn, 1<<20)
	t.Cleanup(func() {
		_ = agentOut.Close()
		go func() { _, _ = io.Copy(io.Discard, br) }() // whatever else the guard writes
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the guard did not end after the agent left")
		}
	})
	return agentOut, br
}

func askStdio(t *testing.T, w io.Writer, r *bufio.Reader, line string) string {
	t.Helper()
	if _, err := io.WriteString(w, line+"\n"); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	go func() {
		l, _ := r.ReadString('\n')
		got <- l
	}()
	select {
	case l := <-got:
		return l
	case <-time.After(10 * time.Second):
		t.Fatal("no answer from the guard")
		return ""
	}
}

// readCall has no arguments: with some, the guard would list the server's
// tools first (argkeys.go), and this server answers anything alike.
const readCall = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{}}}`

func TestStdioGuardJudgesResults(t *testing.T) {
	cases := []struct {
		name, answer string
		want, never  []string
	}{
		{"redact", `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"a AKIAIOSFODNN7EXAMPLE"},{"type":"text","text":"AKIAIOSFODNN7EXAMPLE b"}],"structuredContent":{"k":"AKIAIOSFODNN7EXAMPLE"}}}`,
			[]string{`"text":"a [REDACTED:aws-key]"`, `"text":"[REDACTED:aws-key] b"`, `"k":"[REDACTED:aws-key]"`}, []string{"AKIAIOSFODNN7EXAMPLE"}},
		{"deny", `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"the SECRET"}]}}`,
			[]string{`"isError":true`, `no-secret: secrets stay put`, `"id":1`}, []string{"the SECRET"}},
		{"allow", `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"fine"}]}}`,
			[]string{`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"fine"}]}}`}, nil},
		{"malformed", `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":["SECRET"]}]}}`,
			[]string{`"isError":true`, "RESULT_UNREADABLE: the tools/call result is not a CallToolResult the proxy can judge: content block 0 is a text block whose text is not a string; withheld"}, []string{`["SECRET"]`}},
		{"an error answer", `{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"SECRET"}}`,
			[]string{`"message":"SECRET"`}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			k := &keyJudge{}
			w, r := stdioAnswering(t, c.answer, k.judge, 0)
			got := askStdio(t, w, r, readCall)
			for _, want := range c.want {
				if !strings.Contains(got, want) {
					t.Errorf("the agent read %s, lacking %q", got, want)
				}
			}
			for _, n := range c.never {
				if strings.Contains(got, n) {
					t.Errorf("the agent read %s, holding %q", got, n)
				}
			}
		})
	}
}

// TestStdioGuardJudgesWithTheCallsFields: the judge gets the call's
// document (its tool, server and action) with the output.
func TestStdioGuardJudgesWithTheCallsFields(t *testing.T) {
	k := &keyJudge{}
	w, r := stdioAnswering(t, `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"x"}],"isError":true}}`, k.judge, 0)
	askStdio(t, w, r, readCall)
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.asked) != 1 {
		t.Fatalf("judged %d times", len(k.asked))
	}
	req := k.asked[0]
	out, _ := req["output"].(map[string]any)
	if req["tool_name"] != "read_file" || req["server"] != "files" || req["action"] != "call" ||
		out["text"] != "x" || out["isError"] != true || out["size"] != float64(len(`{"content":[{"type":"text","text":"x"}],"isError":true}`)) {
		t.Fatalf("the judge was asked %v", req)
	}
}

// TestStdioGuardResultLimit: a line past --max-result-bytes is judged on
// what was held (truncated): withheld when the judge denies, saying it was
// larger than the limit; the next line is read as usual.
func TestStdioGuardResultLimit(t *testing.T) {
	big := strings.Repeat("x", 300<<10) // past the limit and the reader's 64 KiB buffer
	answer := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + big + `"}]}}`
	k := &keyJudge{}
	w, r := stdioAnswering(t, answer, k.judge, 4096)
	got := askStdio(t, w, r, readCall)
	if !strings.Contains(got, `"isError":true`) || !strings.Contains(got, "RESULT_TOO_LARGE: the result is larger than --max-result-bytes (4096 bytes)") || strings.Contains(got, big) {
		t.Fatalf("past the limit the agent read %.300s", got)
	}
	k.mu.Lock()
	truncated := k.truncated
	k.mu.Unlock()
	if len(truncated) != 1 || !truncated[0] {
		t.Fatalf("judged truncated %v, want once, truncated", truncated)
	}
	// The rest of the long line was read past: the next answer is whole.
	if got := askStdio(t, w, r, strings.Replace(readCall, `"id":1`, `"id":2`, 1)); !strings.HasPrefix(got, `{"jsonrpc":"2.0","id":`) {
		t.Fatalf("the next answer: %.200s", got)
	}
}

// TestStdioGuardPassesALongLineWhole: past the limit, a result the judge
// lets go reaches the agent whole, byte for byte.
func TestStdioGuardPassesALongLineWhole(t *testing.T) {
	big := strings.Repeat("y", 300<<10)
	answer := `{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"` + big + `"}]}}`
	allowAll := func(context.Context, []byte, bool) (engine.Result, []byte) {
		return engine.Result{Decision: engine.Allow, Effect: engine.EffectAllow}, nil
	}
	w, r := stdioAnswering(t, answer, allowAll, 4096)
	if got := askStdio(t, w, r, readCall); got != answer+"\n" {
		t.Fatalf("the agent read %d bytes, want the %d of the answer", len(got), len(answer)+1)
	}
}
