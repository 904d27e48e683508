package mcp

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/engine"
)

// BenchmarkJudgeResult is what the proxy does to a tools/call answer
// (a 1 KiB text result, one message) when the bundle has 10 result rules,
// none matching: read it, build the output, decide, record.
func BenchmarkJudgeResult(b *testing.B) {
	p := newTestProxy(b, decide.Config{AgentID: "bench"}, "files=http://127.0.0.1:1/mcp")
	var rules []engine.Rule
	for i := range 10 {
		rules = append(rules, engine.Rule{ID: fmt.Sprintf("r%d", i), Phase: engine.PhaseResult, Effect: "deny",
			Conditions: []engine.Condition{{Field: "output.text", Operator: "contains", Value: rawOf(fmt.Sprintf("INTERNAL-%d", i))}}})
	}
	p.serve(b, engine.Bundle{Policies: []engine.Policy{{ID: "results", Version: 1, DefaultEffect: "allow", Rules: rules}}})
	msg := []byte(result("7", "contents of "+strings.Repeat("p", 1024)))
	req, err := callRequest("read_file", "files", "call", json.RawMessage(`{"path":"x"}`), "", nil, 1000)
	must(b, err)
	j := &resultJudge{p: p, ctx: context.Background(), limit: DefaultMaxResultBytes}
	b.ReportAllocs()
	for b.Loop() {
		j.calls = []*pendingResult{{id: json.RawMessage("7"), req: req, tool: "read_file"}}
		if out := j.answers(msg); len(out) != len(msg) {
			b.Fatal("changed")
		}
	}
}
