package engine

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// genSource turns fuzz bytes into choices. When the bytes run out every
// choice is the first option and no rare event happens, so short inputs
// still make well-formed cases.
type genSource struct{ data []byte }

func (g *genSource) intn(n int) int {
	if n <= 1 || len(g.data) == 0 {
		return 0
	}
	v := int(g.data[0])
	g.data = g.data[1:]
	return v % n
}

// rare is true about once in n choices.
func (g *genSource) rare(n int) bool { return g.intn(n) == n-1 }

func pickFrom[T any](g *genSource, xs ...T) T { return xs[g.intn(len(xs))] }

// The vocabulary is small on purpose: policies and requests draw from the
// same words so that conditions actually hold, and it holds the values where
// types and stringification matter (5000 vs "5000", "&&" inside objects).
var (
	genToolNames = []string{"Bash", "Edit", "Read", "bash", "5", ""}
	genAgentIDs  = []string{"agent-1", "Agent-1", "AGENT-K", "agent-\u212a", "agent-k", "\u017fam", "SAM", "stra\u00dfe", "STRA\u1e9eE", "strasse", ""}
	genFields    = []string{"tool_name", "agent_id", "input.command", "input.path", "input", "input.nested.deep",
		"kwargs.amount", "kwargs.flag", "kwargs.note", "kwargs", "args.0", "args.1.x", "args.1", "args.2", "args",
		"input.missing", "kwargs.amount.x", "session_id", "args.01"}
	genBadFields = []string{"", "input..command", ".input", "input.", "__proto__", "input.constructor", "a.prototype",
		strings.Repeat("a.", 16) + "a", strings.Repeat("x", 257)}
	genStrings = []string{"Bash", "bash", "Edit", "rm", "rm -rf /", "-rf", "/", "ls", "ls -la", "a&&b", "&&", "<script>",
		"5000", "1000", "1e3", "abc", "true", "null", "", `{"a":1}`, "x", "agent-1", "[1,2]", "0x10", "NaN", " 1000",
		"\u212a", "\u00e9", "line\nbreak", "+5", ".5", "05", "-2.5e-1", `{"x":"n"}`, `"command":"rm -rf /"`, "5", `"a&&b"`}
	genNumbers     = []string{"5000", "5000.0", "999", "1000", "0", "-1", "1.5", "1e21", "1e-7", "5e3", "5"}
	genPatterns    = []string{"^rm", "rf /$", "^Bash$", "[0-9]+", "(?i)bash", "", "^$", "a&&b", `^\{`, "5000", `^[1-9][0-9]{3,}$`, "&&", "(?s).", "rm", "^ls$", `e\+21$`, `\d\.\d`, "\u212a", "(?i)k", "<", `^\[`}
	genBadPattern  = []string{"(", "(?=x)", `(a)\1`, "x{1001}", "[z-a]"}
	genBadValues   = []string{"null", "{}", "[1]", "{", `"x"`, "7", "true"}
	genPolicyNames = []string{"alpha", "beta", "gamma", "delta"}
)

func quoteJSON(s string) json.RawMessage { return raw(s) }

func (g *genSource) scalar() json.RawMessage {
	switch g.intn(3) {
	case 0:
		return quoteJSON(pickFrom(g, genStrings...))
	case 1:
		return json.RawMessage(pickFrom(g, genNumbers...))
	}
	return json.RawMessage(pickFrom(g, "true", "false"))
}

func (g *genSource) toolValue() json.RawMessage {
	if g.rare(6) {
		return json.RawMessage("5")
	}
	return quoteJSON(pickFrom(g, genToolNames...))
}

func (g *genSource) condition() Condition {
	c := Condition{Field: pickFrom(g, genFields...), Operator: pickFrom(g, Operators...)}
	if g.rare(128) {
		c.Field = pickFrom(g, genBadFields...)
	}
	value := g.scalar
	if c.Field == "tool_name" && g.intn(4) != 0 {
		value = g.toolValue
	}
	switch c.Operator {
	case "eq", "neq":
		c.Value = value()
	case "in", "not_in":
		if g.intn(4) == 0 {
			c.Value = value()
		} else {
			for range 1 + g.intn(3) {
				c.Values = append(c.Values, value())
			}
		}
	case "contains", "not_contains", "starts_with", "ends_with":
		c.Value = quoteJSON(pickFrom(g, genStrings...))
	case "matches":
		c.Value = quoteJSON(pickFrom(g, genPatterns...))
		if g.rare(12) {
			c.Value = quoteJSON(pickFrom(g, genBadPattern...))
		}
	case "gt", "gte", "lt", "lte":
		c.Value = json.RawMessage(pickFrom(g, genNumbers...))
	}
	if g.rare(128) {
		c.Operator = "bogus"
	}
	if g.rare(96) {
		switch g.intn(4) {
		case 0:
			c.Value = json.RawMessage(pickFrom(g, genBadValues...))
		case 1:
			c.Values = []json.RawMessage{g.scalar()}
		case 2:
			c.Value, c.Values = nil, nil
		case 3:
			c.Values = []json.RawMessage{}
		}
	}
	return c
}

func (g *genSource) rule(i int) Rule {
	r := Rule{ID: fmt.Sprintf("r%d", i), Effect: pickFrom(g, "allow", "deny")}
	if g.rare(64) {
		r.ID = pickFrom(g, "r0", "Bad_Id", "", "-x", strings.Repeat("a", 64))
	}
	if g.rare(128) {
		r.Effect = pickFrom(g, "block", "")
	}
	if g.rare(4) {
		r.Description = "rule " + r.ID
	}
	if g.intn(2) == 0 {
		r.Conditions = append(r.Conditions, g.toolCondition())
	}
	for range g.intn(4) {
		r.Conditions = append(r.Conditions, g.condition())
	}
	return r
}

// toolCondition pins tool_name the way real policies do, which is what the
// engine's tool index is built from.
func (g *genSource) toolCondition() Condition {
	c := Condition{Field: "tool_name", Operator: pickFrom(g, "eq", "in", "in", "neq", "not_in", "matches")}
	switch c.Operator {
	case "in", "not_in":
		if g.intn(4) == 0 {
			c.Value = g.toolValue()
			break
		}
		for range 1 + g.intn(3) {
			c.Values = append(c.Values, g.toolValue())
		}
	case "matches":
		c.Value = quoteJSON(pickFrom(g, "^Bash$", "(?i)^bash$", "^E", "d$", "5"))
	default:
		c.Value = g.toolValue()
	}
	return c
}

func (g *genSource) policy() Policy {
	p := Policy{ID: pickFrom(g, genPolicyNames...), Version: int64(g.intn(3)), Priority: pickFrom[int32](g, 0, 0, 1, 5, -1),
		DefaultEffect: pickFrom(g, "allow", "deny", "")}
	if g.rare(64) {
		p.DefaultEffect = "maybe"
	}
	n := 1 + g.intn(4)
	if g.rare(64) {
		n = 0
	}
	for i := range n {
		p.Rules = append(p.Rules, g.rule(i))
	}
	return p
}

func (g *genSource) bundle(now time.Time) Bundle {
	var b Bundle
	n := 1 + g.intn(3)
	if g.rare(16) {
		n = 0
	}
	for range n {
		b.Policies = append(b.Policies, g.policy())
	}
	past, future := now.Add(-time.Minute), now.Add(time.Minute)
	for range g.intn(3) {
		f := FrozenAgent{ID: pickFrom(g, genAgentIDs...)}
		f.ExpiresAt = pickFrom[*time.Time](g, nil, &future, &past, &time.Time{})
		b.FrozenAgents = append(b.FrozenAgents, f)
	}
	return b
}

func (g *genSource) requestValue() any {
	switch g.intn(8) {
	case 0, 1, 2:
		return pickFrom(g, genStrings...)
	case 3, 4:
		f, err := strconv.ParseFloat(pickFrom(g, genNumbers...), 64)
		if err != nil {
			panic(err)
		}
		return f
	case 5:
		return pickFrom[any](g, true, false, nil)
	case 6:
		return pickFrom[any](g, []any{}, map[string]any{}, []any{"a&&b", 1.5, nil})
	}
	return map[string]any{"k": pickFrom(g, genStrings...), "n": 5000.0}
}

func (g *genSource) request() map[string]any {
	req := map[string]any{}
	switch g.intn(10) {
	case 0:
	case 1:
		req["tool_name"] = 5.0
	case 2:
		req["tool_name"] = nil
	default:
		req["tool_name"] = pickFrom(g, genToolNames...)
	}
	switch g.intn(5) {
	case 0:
	case 1:
		req["agent_id"] = 7.0
	default:
		req["agent_id"] = pickFrom(g, genAgentIDs...)
	}
	input := map[string]any{}
	if !g.rare(8) {
		input["command"] = g.requestValue()
	}
	if g.intn(2) == 0 {
		input["path"] = pickFrom(g, genStrings...)
	}
	if g.rare(4) {
		input["nested"] = map[string]any{"deep": g.requestValue()}
	}
	req["input"] = input
	if g.rare(16) {
		req["input"] = pickFrom(g, genStrings...)
	}
	kwargs := map[string]any{"amount": g.requestValue()}
	if g.intn(2) == 0 {
		kwargs["flag"] = pickFrom[any](g, true, false, "true")
	}
	if g.intn(2) == 0 {
		kwargs["note"] = g.requestValue()
	}
	if !g.rare(8) {
		req["kwargs"] = kwargs
	}
	args := []any{}
	for i := range g.intn(4) {
		switch i {
		case 1:
			args = append(args, map[string]any{"x": g.requestValue()})
		default:
			args = append(args, g.requestValue())
		}
	}
	if len(args) > 0 || g.intn(2) == 0 {
		req["args"] = args
	}
	if g.rare(4) {
		req["session_id"] = g.requestValue()
	}
	return req
}
