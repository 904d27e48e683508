package mcp

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/engine"
)

// The proxy's result judging against an upstream that answers as the
// test says (a JSON body or an event stream), so each path and each
// malformed answer is reached: the end-to-end tests with the SDK's server
// are in sidecar/proxy_results_e2e_test.go.

func rawOf(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// judgingBundle redacts AWS keys, denies results saying SECRET and
// tools/call results of tool "big" whose text is not empty.
func judgingBundle() engine.Bundle {
	return engine.Bundle{Policies: []engine.Policy{{ID: "results", Version: 1, DefaultEffect: "allow", Rules: []engine.Rule{
		{ID: "aws-key", Phase: engine.PhaseResult, Effect: string(engine.EffectRedact),
			Conditions: []engine.Condition{{Field: "output.text", Operator: "matches", Value: rawOf(`AKIA[0-9A-Z]{16}`)}}},
		{ID: "no-secret", Phase: engine.PhaseResult, Effect: "deny", Description: "secrets stay put",
			Conditions: []engine.Condition{{Field: "output.text", Operator: "contains", Value: rawOf("SECRET")}}},
	}}}}
}

// answering is an upstream answering every POST with contentType and
// body, its "ID" replaced by the request's id.
func answering(t *testing.T, contentType string, body func(id string) string) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var msg struct {
			ID json.RawMessage `json:"id"`
		}
		b, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(b, &msg)
		w.Header().Set("Content-Type", contentType)
		_, _ = io.WriteString(w, body(string(msg.ID)))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// callThrough sends one tools/call through a proxy of upstream serving b,
// and returns the answer's body.
func callThrough(t *testing.T, upstream string, b engine.Bundle, maxResult int) (string, *Proxy) {
	t.Helper()
	p := newTestProxy(t, decide.Config{}, "up="+upstream)
	p.maxResult = maxResult
	p.serve(t, b)
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp/up", strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file","arguments":{}}}`)) // no arguments: no tools/list first (argkeys.go)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	must(t, err)
	return string(out), p
}

func result(id, text string) string {
	return `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":` + string(rawOf(text)) + `}]}}`
}

func sse(msgs ...string) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("event: message\ndata: " + m + "\n\n")
	}
	return b.String()
}

const progress = `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1,"message":"AKIAIOSFODNN7EXAMPLE SECRET"}}`

func TestProxyJudgesJSONAndStreamedResults(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, contentType string
		body              func(id string) string
		want              []string // in the answer
		never             []string // never in it
	}{
		{"json redact", "application/json", func(id string) string { return result(id, "key AKIAIOSFODNN7EXAMPLE end") },
			[]string{`"text":"key [REDACTED:aws-key] end"`, `"id":7`}, []string{"AKIAIOSFODNN7EXAMPLE", `"isError":true`}},
		{"json deny", "application/json", func(id string) string { return result(id, "the SECRET plan") },
			[]string{`"isError":true`, `no-secret: secrets stay put`, `"id":7`}, []string{"the SECRET plan"}},
		{"json allow", "application/json", func(id string) string { return result(id, "nothing to see") },
			[]string{result("7", "nothing to see")}, nil},
		{"json batch", "application/json", func(id string) string { return "[" + result(id, "AKIAIOSFODNN7EXAMPLE") + "]" },
			[]string{`[{`, `[REDACTED:aws-key]`}, []string{"AKIAIOSFODNN7EXAMPLE"}},
		{"sse redact after a progress notification", "text/event-stream", func(id string) string { return sse(progress, result(id, "AKIAIOSFODNN7EXAMPLE")) },
			[]string{"data: " + progress + "\n\n", `[REDACTED:aws-key]`}, []string{`"text":"AKIAIOSFODNN7EXAMPLE"`}},
		{"sse deny", "text/event-stream", func(id string) string { return sse(result(id, "SECRET")) },
			[]string{`"isError":true`, `no-secret: secrets stay put`}, []string{`"text":"SECRET"`}},
		{"an answer to another id is not judged", "application/json", func(string) string { return result("8", "SECRET") },
			[]string{result("8", "SECRET")}, nil},
		{"an error answer is not judged", "application/json", func(id string) string {
			return `{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-1,"message":"SECRET"}}`
		}, []string{`"message":"SECRET"`}, nil},
		{"malformed content withholds", "application/json", func(id string) string {
			return `{"jsonrpc":"2.0","id":` + id + `,"result":{"content":"SECRET"}}`
		}, []string{`"isError":true`, "RESULT_UNREADABLE: the tools/call result is not a CallToolResult the proxy can judge: content is not an array; withheld"}, []string{`"content":"SECRET"`}},
		{"a text that is not a string withholds", "text/event-stream", func(id string) string {
			return sse(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":{"s":"SECRET"}}]}}`)
		}, []string{"RESULT_UNREADABLE", "content block 0 is a text block whose text is not a string"}, []string{`"s":"SECRET"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, _ := callThrough(t, answering(t, c.contentType, c.body), judgingBundle(), 0)
			for _, w := range c.want {
				if !strings.Contains(got, w) {
					t.Errorf("the answer lacks %q:\n%s", w, got)
				}
			}
			for _, n := range c.never {
				if strings.Contains(got, n) {
					t.Errorf("the answer holds %q:\n%s", n, got)
				}
			}
		})
	}
}

// TestProxyWithoutResultRulesRelaysResultsUnread: no result rule, no
// judging: even a result no rule could read goes on byte for byte.
func TestProxyWithoutResultRulesRelaysResultsUnread(t *testing.T) {
	t.Parallel()
	for _, ct := range []string{"application/json", "text/event-stream"} {
		body := `{"jsonrpc":"2.0","id":7,"result":{"content":"AKIAIOSFODNN7EXAMPLE SECRET"}}`
		if ct == "text/event-stream" {
			body = sse(body)
		}
		b := engine.Bundle{Policies: []engine.Policy{{ID: "calls", Version: 1, DefaultEffect: "allow", Rules: []engine.Rule{
			{ID: "no-delete", Effect: "deny", Conditions: []engine.Condition{{Field: "tool_name", Operator: "eq", Value: rawOf("delete_file")}}},
		}}}}
		got, p := callThrough(t, answering(t, ct, func(string) string { return body }), b, 0)
		if got != body {
			t.Errorf("%s: the answer changed:\n%s\nwant\n%s", ct, got, body)
		}
		if p.d.State().Compiled.HasResultRules() {
			t.Errorf("a bundle of call rules has result rules")
		}
	}
}

// TestProxyResultLimit: past --max-result-bytes the answer is judged on
// what was held as if the text rules matched: withheld under a deny or
// redact rule, saying it was larger than the limit; otherwise passed on
// whole.
func TestProxyResultLimit(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("harmless ", 500) // 4,500 bytes
	for _, ct := range []string{"application/json", "text/event-stream"} {
		body := func(id string) string {
			if ct == "text/event-stream" {
				return sse(progress, result(id, big))
			}
			return result(id, big)
		}
		got, _ := callThrough(t, answering(t, ct, body), judgingBundle(), 1024)
		if !strings.Contains(got, `"isError":true`) || !strings.Contains(got, "RESULT_TOO_LARGE: the result is larger than --max-result-bytes (1024 bytes)") || strings.Contains(got, big) {
			t.Errorf("%s: past the limit under a deny rule:\n%.600s", ct, got)
		}
		passing := engine.Bundle{Policies: []engine.Policy{{ID: "results", Version: 1, DefaultEffect: "allow", Rules: []engine.Rule{
			{ID: "errors", Phase: engine.PhaseResult, Effect: "deny",
				Conditions: []engine.Condition{{Field: "output.isError", Operator: "eq", Value: rawOf(true)}}},
		}}}}
		got, _ = callThrough(t, answering(t, ct, body), passing, 1024)
		if got != body("7") {
			t.Errorf("%s: past the limit with no rule on its text, the answer changed:\n%.600s", ct, got)
		}
	}
}

// TestProxyWithholdsResultsReplayedOnTheSessionStream: a tools/call result
// on a GET stream (a resumed POST stream's replay) is not the answer to a
// call the proxy kept, so with result rules it is withheld; other results
// and notifications pass.
func TestProxyWithholdsResultsReplayedOnTheSessionStream(t *testing.T) {
	t.Parallel()
	read := `{"jsonrpc":"2.0","id":4,"result":{"contents":[{"uri":"file:///x","text":"SECRET"}]}}`
	upstream := answering(t, "text/event-stream", func(string) string { return sse(progress, result("3", "SECRET"), read) })
	p := newTestProxy(t, decide.Config{}, "up="+upstream)
	p.serve(t, judgingBundle())
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/mcp/up", nil)
	req.Header.Set("Accept", "text/event-stream")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	must(t, err)
	got := string(body)
	for _, want := range []string{"data: " + progress + "\n\n", "data: " + read + "\n\n", `"id":3`, `"isError":true`,
		"RESULT_UNJUDGED: a tools/call result replayed on the session's stream, apart from its call, cannot be judged; withheld"} {
		if !strings.Contains(got, want) {
			t.Errorf("the stream lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, result("3", "SECRET")) {
		t.Errorf("the replayed result went on:\n%s", got)
	}
}
