package sidecar

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/mcptest"
)

// Result rules through the MCP proxy (issue 28), end to end: the server in
// test/mcpserver, the whole sidecar, the SDK client, both protocol
// versions, answers as event streams and (the "json" runs) as JSON bodies.

// mcpAWSKey is an AWS access key id as the aws-key rule finds it.
const mcpAWSKey = "AKIAIOSFODNN7EXAMPLE"

func rawJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// resultsBundle is mcptest.Bundle with result rules: an AWS key in any
// result is redacted, a result marked internal is withheld, and a query
// whose structured result is a JSON dump of more than 100 rows is
// withheld.
func resultsBundle() engine.Bundle {
	b := mcptest.Bundle()
	b.Policies = append(b.Policies, engine.Policy{ID: "results", Version: 1, DefaultEffect: "allow", Rules: []engine.Rule{
		{ID: "aws-key", Phase: engine.PhaseResult, Effect: string(engine.EffectRedact), Description: "AWS keys never reach the model",
			Conditions: []engine.Condition{{Field: "output.text", Operator: "matches", Value: rawJSON(`AKIA[0-9A-Z]{16}`)}}},
		{ID: "no-internal", Phase: engine.PhaseResult, Effect: "deny", Description: "internal documents stay inside",
			Conditions: []engine.Condition{{Field: "output.text", Operator: "contains", Value: rawJSON("INTERNAL ONLY")}}},
		{ID: "rows-cap", Phase: engine.PhaseResult, Effect: "deny", Description: "a JSON dump of more than 100 rows",
			Conditions: []engine.Condition{
				{Field: "tool_name", Operator: "eq", Value: rawJSON("query")},
				{Field: "output.structured.payload", Operator: "is_valid_json"},
				{Field: "output.structured.rows", Operator: "gt", Value: rawJSON(100)},
			}},
	}})
	return b
}

func texts(t testing.TB, res *mcp.CallToolResult) []string {
	t.Helper()
	var out []string
	for _, c := range res.Content {
		tc, ok := c.(*mcp.TextContent)
		if !ok {
			t.Fatalf("content %T, want text", c)
		}
		out = append(out, tc.Text)
	}
	return out
}

func TestMCPProxyJudgesResults(t *testing.T) {
	for _, version := range append(mcpVersions, "json") {
		t.Run(version, func(t *testing.T) {
			up := startMCPServer(t)
			endpoint := up.endpoint(version)
			if version == "json" {
				// The server answers with JSON bodies, not event streams.
				version, endpoint = "2026-07-28", up.base+"/mcp-json"
			}
			rig := startMCPRig(t, endpoint, resultsBundle(), nil)
			cs := rig.connect(version, nil, nil)

			// A read_file whose result holds an AWS key: redacted, the
			// rest as the server wrote it.
			res := callTool(t, cs, "read_file", map[string]any{"path": "/home/ci/.aws/credentials: aws_access_key_id=" + mcpAWSKey + " region=eu"})
			if got, want := resultText(t, res), "contents of /home/ci/.aws/credentials: aws_access_key_id=[REDACTED:aws-key] region=eu"; got != want || res.IsError {
				t.Fatalf("read_file answered %q (isError %v), want %q", got, res.IsError, want)
			}
			// Several blocks: each keeps its own text, redacted where the
			// key is.
			res = callTool(t, cs, "echo", map[string]any{"texts": []string{"first " + mcpAWSKey, "second", mcpAWSKey + " third"}})
			if got := strings.Join(texts(t, res), "|"); got != "first [REDACTED:aws-key]|second|[REDACTED:aws-key] third" {
				t.Fatalf("echo answered %q", got)
			}

			// A result a deny rule matches: withheld, the client reads why.
			deniedDecision(t, callTool(t, cs, "echo", map[string]any{"texts": []string{"plan", "INTERNAL ONLY: the 2027 roadmap"}}),
				"no-internal: internal documents stay inside")
			if got := up.stats(t).Calls["echo"]; got != 2 {
				t.Fatalf("the server ran echo %d times, want 2: a result rule judges what the tool returned, after it ran", got)
			}

			// Structured results: is_valid_json and gt on output.structured.*.
			dump := `[{"id":1},{"id":2}]`
			deniedDecision(t, callTool(t, cs, "query", map[string]any{"rows": 500, "payload": dump}),
				"rows-cap: a JSON dump of more than 100 rows")
			for _, args := range []map[string]any{{"rows": 500, "payload": "five hundred rows, summarised"}, {"rows": 5, "payload": dump}} {
				res := callTool(t, cs, "query", args)
				if res.IsError {
					t.Fatalf("query %v was withheld: %+v", args, res)
				}
				sc, _ := json.Marshal(res.StructuredContent)
				if want, _ := json.Marshal(args); string(sc) != string(want) {
					t.Fatalf("query %v: structured content %s, want %s", args, sc, want)
				}
			}
			// The key in a structured result's string is redacted there
			// too, not only in its text block.
			res = callTool(t, cs, "query", map[string]any{"rows": 1, "payload": "key " + mcpAWSKey})
			sc, _ := json.Marshal(res.StructuredContent)
			if strings.Contains(string(sc), mcpAWSKey) || !strings.Contains(string(sc), "[REDACTED:aws-key]") || strings.Contains(strings.Join(texts(t, res), ""), mcpAWSKey) {
				t.Fatalf("query with a key: structured %s, text %q", sc, texts(t, res))
			}

			// Every result decision is logged with its phase and where the
			// spans were, never what they held.
			eventually(t, "the result decisions are logged", func() bool {
				var redacted, denied int
				for _, l := range rig.logs.lines(t) {
					if l["phase"] != "result" {
						continue
					}
					switch {
					case l["effect"] == "redact" && l["redactions"] != nil:
						redacted++
					case l["decision"] == "deny":
						denied++
					}
				}
				return redacted >= 3 && denied == 2
			})
			// (The read_file call's path held the key, and --log-fields
			// keeps input: that is the call's, not what the tool returned.)
			for _, l := range rig.logs.lines(t) {
				delete(l, "request")
				if s := fmt.Sprint(l); strings.Contains(s, mcpAWSKey) && l["phase"] == "result" {
					t.Fatalf("a result decision's log line holds the key: %s", s)
				}
			}
		})
	}
}

// TestMCPProxyResultLimit: past --max-result-bytes a result is judged on
// what was held, as if every condition on its text matched: a deny or
// redact rule withholds it saying so; without one it passes whole.
func TestMCPProxyResultLimit(t *testing.T) {
	for _, version := range append(mcpVersions, "json") {
		t.Run(version, func(t *testing.T) {
			up := startMCPServer(t)
			endpoint := up.endpoint(version)
			if version == "json" {
				version, endpoint = "2026-07-28", up.base+"/mcp-json"
			}
			rig := startMCPRig(t, endpoint, resultsBundle(), func(o *Options) { o.MCP.MaxResultBytes = 4096 })
			cs := rig.connect(version, nil, nil)
			big := strings.Repeat("harmless text ", 1000) // 14,000 bytes
			res := callTool(t, cs, "echo", map[string]any{"texts": []string{big}})
			if !res.IsError {
				t.Fatalf("a result past the limit went on under a redact rule: %d bytes", len(resultText(t, res)))
			}
			if got := resultText(t, res); !strings.HasPrefix(got, "RESULT_TOO_LARGE: the result is larger than --max-result-bytes (4096 bytes)") {
				t.Fatalf("withheld with %q", got)
			}
			if small := resultText(t, callTool(t, cs, "echo", map[string]any{"texts": []string{"small"}})); small != "small" {
				t.Fatalf("a small result answered %q", small)
			}

			// Only a rule that cannot match what was held: the result passes
			// whole.
			b := mcptest.Bundle()
			b.Policies = append(b.Policies, engine.Policy{ID: "results", Version: 1, DefaultEffect: "allow", Rules: []engine.Rule{
				{ID: "errors-logged", Phase: engine.PhaseResult, Effect: "audit",
					Conditions: []engine.Condition{{Field: "output.isError", Operator: "eq", Value: rawJSON(true)}}},
			}})
			rig.publish(b)
			res = callTool(t, cs, "echo", map[string]any{"texts": []string{big}})
			if res.IsError || resultText(t, res) != big {
				t.Fatalf("a result past the limit with no deny or redact rule was not passed whole: isError %v, %d bytes", res.IsError, len(resultText(t, res)))
			}
		})
	}
}
