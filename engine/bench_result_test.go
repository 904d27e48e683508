package engine

import (
	"fmt"
	"strings"
	"testing"
)

// resultRules are n result rules of the shapes issue 28 names: a pattern,
// a literal, a JSON check and a row count, none matching a plain text.
func resultRules(n int) []Rule {
	rules := make([]Rule, n)
	for i := range rules {
		var c Condition
		switch i % 4 {
		case 0:
			c = cond("output.text", "matches", fmt.Sprintf(`SECRET%d[0-9A-Z]{16}`, i))
		case 1:
			c = cond("output.text", "contains", fmt.Sprintf("INTERNAL-%d", i))
		case 2:
			c = cond("output.structured.rows", "gt", 1000+i)
		default:
			c = Condition{Field: "output.text", Operator: "is_valid_json"}
		}
		rules[i] = Rule{ID: fmt.Sprintf("result-%d", i), Phase: PhaseResult, Effect: pickEffect(i), Conditions: []Condition{c}}
	}
	return rules
}

func pickEffect(i int) string { return [...]string{"redact", "deny", "warn", "audit"}[i%4] }

// BenchmarkEvaluateResult: a call's evaluation with result rules in the
// bundle costs what it did without them (0 allocations), and a result
// evaluation of 10 result rules on a 1 KiB text.
func BenchmarkEvaluateResult(b *testing.B) {
	callReq := Request{"tool_name": "tool_500", "agent_id": "agent-1",
		"input": map[string]any{"command": "run danger_500 now"}, "kwargs": map[string]any{"amount": 5000.0}}
	b.Run("call/rules=1000/by-tool+result=10", func(b *testing.B) {
		bundle := byToolBundle(1000)
		bundle.Policies = append(bundle.Policies, Policy{ID: "results", Rules: resultRules(10)})
		c := mustCompile(b, bundle)
		if got := c.Evaluate(callReq, EvalOptions{}); got.Decision != Deny {
			b.Fatalf("%+v", got)
		}
		b.ReportAllocs()
		for b.Loop() {
			c.Evaluate(callReq, EvalOptions{})
		}
	})
	text := strings.Repeat("plain result text, nothing to see. ", 30)[:1024]
	resultReq := Request{"tool_name": "read_file", "output": map[string]any{"text": text, "isError": false, "size": 1024.0,
		"structured": map[string]any{"rows": 3.0}}}
	for _, n := range []int{10, 100} {
		b.Run(fmt.Sprintf("result/rules=%d/1KiB", n), func(b *testing.B) {
			c := mustCompile(b, Bundle{Policies: []Policy{{ID: "results", Rules: resultRules(n)}}})
			opts := EvalOptions{Phase: PhaseResult}
			if got := c.Evaluate(resultReq, opts); got.Decision != Allow || got.MatchedRuleID != "" {
				b.Fatalf("%+v", got)
			}
			b.ReportAllocs()
			for b.Loop() {
				c.Evaluate(resultReq, opts)
			}
		})
	}
	b.Run("result/redact/1KiB", func(b *testing.B) {
		c := mustCompile(b, Bundle{Policies: []Policy{{ID: "results", Rules: append(resultRules(9),
			resultRule("aws", "redact", cond("output.text", "matches", `AKIA[0-9A-Z]{16}`)))}}})
		req := Request{"tool_name": "read_file", "output": map[string]any{"text": text[:500] + awsKey + text[520:]}}
		opts := EvalOptions{Phase: PhaseResult}
		if got := c.Evaluate(req, opts); got.StatedEffect() != EffectRedact {
			b.Fatalf("%+v", got)
		}
		b.ReportAllocs()
		for b.Loop() {
			c.Evaluate(req, opts)
		}
	})
}
