// Command enginediff prints the decisions of the engine it is built with
// over a deterministic random corpus of ordered bundles (seed 000's model,
// nothing of the gateway model) and requests, one JSON line per case, with
// traces. hack/diff-engine.sh builds it at a base commit and at the working
// tree and diffs the two outputs: the gateway model must not change one
// decision, matched id, reason, code or trace entry of such bundles. It
// uses only the engine API both versions share, and leaves out the result
// fields the gateway model added.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"time"

	"github.com/toolgate/toolgate/engine"
)

func main() {
	seed := flag.Uint64("seed", 1, "corpus seed")
	n := flag.Int("n", 20000, "cases")
	flag.Parse()
	r := rand.New(rand.NewPCG(*seed, 9))
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	out := json.NewEncoder(os.Stdout)
	for i := range *n {
		b := bundle(r)
		c, diags := engine.Compile(b)
		req := request(r)
		res := c.Evaluate(req, engine.EvalOptions{Now: func() time.Time { return now }, Explain: true})
		if err := out.Encode(line{Case: i, Diagnostics: len(diags), Decision: string(res.Decision),
			Policy: res.MatchedPolicyID, Version: res.MatchedPolicyVersion, Rule: res.MatchedRuleID,
			Code: string(res.Code), Reason: res.Reason, Trace: res.Trace}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}

type line struct {
	Case        int    `json:"case"`
	Diagnostics int    `json:"diagnostics"`
	Decision    string `json:"decision"`
	Policy      string `json:"policy"`
	Version     int64  `json:"version"`
	Rule        string `json:"rule"`
	Code        string `json:"code"`
	Reason      string `json:"reason"`
	Trace       any    `json:"trace"`
}

var (
	tools  = []string{"Bash", "Read", "pay", "mcp__db__query", "mcp__github__create_issue"}
	agents = []string{"build-agent", "Build-Agent", "cfo-bot", "analyst-1", ""}
	fields = []string{"tool_name", "agent_id", "session_id", "input.command", "kwargs.amount", "args.0",
		"roles", "roles.0", "server", "resource.name", "resources.0.name", "environment", "context.region", "tokens"}
	ops = []string{"eq", "neq", "in", "not_in", "contains", "not_contains", "starts_with", "ends_with", "matches",
		"gt", "gte", "lt", "lte", "exists", "not_exists", "is_empty", "is_not_empty", "is_valid_json"}
	strs   = []any{"Bash", "pay", "build-agent", "rm -rf", "orders", "eu", "ci", "^mcp__", "db", "", "{}", "[1]"}
	nums   = []any{100, 1000.5, 0, -1}
	values = append(append([]any{true}, strs...), nums...)
)

func pick[T any](r *rand.Rand, s []T) T { return s[r.IntN(len(s))] }

func raw(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

func bundle(r *rand.Rand) engine.Bundle {
	var b engine.Bundle
	for p := range 1 + r.IntN(3) {
		pol := engine.Policy{ID: fmt.Sprintf("p%d", p), Version: int64(1 + r.IntN(3)), Priority: int32(r.IntN(3)),
			DefaultEffect: pick(r, []string{"", "allow", "deny"})}
		for i := range 1 + r.IntN(6) {
			rule := engine.Rule{ID: fmt.Sprintf("r%d", i), Effect: pick(r, []string{"allow", "allow", "deny"})}
			if r.IntN(3) == 0 {
				rule.Description = "because " + rule.ID
			}
			for range 1 + r.IntN(3) {
				rule.Conditions = append(rule.Conditions, condition(r))
			}
			pol.Rules = append(pol.Rules, rule)
		}
		b.Policies = append(b.Policies, pol)
	}
	if r.IntN(4) == 0 {
		b.FrozenAgents = []engine.FrozenAgent{{ID: pick(r, agents[:4])}}
	}
	return b
}

func condition(r *rand.Rand) engine.Condition {
	c := engine.Condition{Field: pick(r, fields), Operator: pick(r, ops)}
	switch c.Operator {
	case "exists", "not_exists", "is_empty", "is_not_empty", "is_valid_json":
	case "in", "not_in":
		for range 1 + r.IntN(3) {
			c.Values = append(c.Values, raw(pick(r, values)))
		}
	case "gt", "gte", "lt", "lte":
		c.Value = raw(pick(r, nums))
	case "eq", "neq":
		c.Value = raw(pick(r, values))
	default:
		c.Value = raw(pick(r, strs))
	}
	if r.IntN(50) == 0 { // now and then a policy that does not compile
		c.Value = raw([]int{1})
	}
	return c
}

func request(r *rand.Rand) engine.Request {
	req := engine.Request{"tool_name": pick(r, tools)}
	maybe := func(key string, v any) {
		if r.IntN(2) == 0 {
			req[key] = v
		}
	}
	maybe("agent_id", pick(r, agents))
	maybe("session_id", "s-1")
	maybe("input", map[string]any{"command": pick(r, []any{"ls", "rm -rf /", "echo {}", 5.0})})
	maybe("kwargs", map[string]any{"amount": pick(r, []any{99.0, 100.0, 1000.5, "100", nil})})
	maybe("args", []any{pick(r, []any{"Bash", 0.0, true, "[1]"})})
	maybe("roles", pick(r, []any{nil, []any{}, []any{"ci"}, []any{"ci", "analyst"}, "ci"}))
	maybe("server", pick(r, []any{"db", 5.0}))
	maybe("resource", map[string]any{"name": "orders"})
	maybe("resources", []any{map[string]any{"type": "table", "name": "orders"}, "junk"})
	maybe("environment", pick(r, []any{"prod", "dev"}))
	maybe("context", map[string]any{"region": pick(r, []any{"eu", "us", 1.0})})
	maybe("tokens", pick(r, []any{0.0, 100.0, -5.0}))
	return req
}
