package engine

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/engine/detect"
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

// callOperators are the operators before detect (issue 28): the call
// generator draws from them, so the cases it makes (and the digests that
// pin them) stay what they were; the result generator adds detect.
var callOperators = Operators[:18]

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
	c := Condition{Field: pickFrom(g, genFields...), Operator: pickFrom(g, callOperators...)}
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

// Issue 9's vocabulary: a few of each so that subjects, targets, select and
// when hit often; tool names cover server derivation's edges.
var (
	gwAgents     = []string{"agent-1", "Agent-1", "build-agent", "AGENT-K", "agent-\u212a", "cfo-bot"}
	gwRoles      = []string{"ci", "analyst", "admin", "Admin"}
	gwServers    = []string{"db", "github", "fs"}
	gwTools      = []string{"Bash", "Read", "pay", "mcp__db__query", "mcp__github__create_issue", "mcp__db__drop__x", "mcp__a", "mcp____b", "mcp__fs__", "mcp__fs__read"}
	gwTypes      = []string{"table", "repo", "file"}
	gwNames      = []string{"orders", "invoices", "users", "main"}
	gwTags       = []string{"pii", "secret", "public"}
	gwActions    = []string{"call", "read", "write"}
	gwEffects    = []string{"read", "write", "delete"}
	gwEnvs       = []string{"prod", "dev"}
	gwConfidence = []string{"verified", "unknown", "low"}
	gwSessions   = []string{"s1", "s2"}
	gwZones      = []string{"", "UTC", "Europe/Berlin", "America/Los_Angeles", "Asia/Kolkata"}
	gwClocks     = []string{"00:00", "01:30", "02:00", "02:30", "03:00", "08:00", "12:00", "17:59", "18:00", "22:00", "23:59"}
	gwDays       = []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}
	gwWindows    = []string{"90s", "1h", "2h", "1d", "7d", "31d"}
	gwBadWindows = []string{"500ms", "32d", "1x", "0d", "", "0s"}
	// gwNows are evaluation instants: a Tuesday noon, around midnight
	// between days, and Europe/Berlin's and America/Los_Angeles's DST days.
	gwNows = []time.Time{
		t0,
		time.Date(2026, 11, 2, 23, 30, 0, 0, time.UTC), // Monday night UTC, Tuesday in Berlin
		time.Date(2026, 11, 3, 0, 30, 0, 0, time.UTC),  // Tuesday 01:30 in Berlin, Monday in LA
		time.Date(2026, 11, 8, 7, 59, 0, 0, time.UTC),  // Sunday
		time.Date(2026, 3, 29, 0, 59, 59, 0, time.UTC), // Berlin 01:59:59 CET, just before the spring jump
		time.Date(2026, 3, 29, 1, 0, 0, 0, time.UTC),   // Berlin 03:00 CEST
		time.Date(2026, 3, 29, 1, 30, 0, 0, time.UTC),  // Berlin 03:30 CEST
		time.Date(2026, 10, 25, 0, 30, 0, 0, time.UTC), // Berlin 02:30 CEST, the first time
		time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC), // Berlin 02:30 CET, the second time
		time.Date(2026, 3, 8, 10, 0, 0, 0, time.UTC),   // LA 03:00 PDT on its spring day
		time.Date(2026, 11, 4, 7, 0, 0, 0, time.UTC),   // LA Tuesday 23:00
	}
)

func gwList(g *genSource, vocab []string) []string {
	out := []string{pickFrom(g, vocab...)}
	for range g.intn(3) {
		out = append(out, pickFrom(g, vocab...))
	}
	return out
}

// gwMaybeEmpty is usually l, rarely an empty list (which validation
// refuses).
func gwMaybeEmpty(g *genSource, l []string) []string {
	if g.rare(320) {
		return []string{}
	}
	return l
}

func (g *genSource) gwSubjects() *Subjects {
	s := &Subjects{}
	switch g.intn(3) {
	case 0:
		s.Agents = gwMaybeEmpty(g, gwList(g, gwAgents))
	case 1:
		s.Roles = gwMaybeEmpty(g, gwList(g, gwRoles))
	default:
		s.Agents, s.Roles = gwList(g, gwAgents), gwList(g, gwRoles)
	}
	return s
}

func (g *genSource) gwResourceTarget() ResourceTarget {
	t := ResourceTarget{Type: pickFrom(g, gwTypes...), Names: gwList(g, gwNames)}
	if g.rare(320) {
		t.Names = nil
	}
	return t
}

func (g *genSource) gwTargets(tiered bool) *Targets {
	t := &Targets{}
	if g.intn(3) == 0 {
		t.Servers = gwMaybeEmpty(g, gwList(g, gwServers))
	}
	if g.intn(3) == 0 {
		t.Tools = gwMaybeEmpty(g, gwList(g, gwTools))
	}
	// Resource-bound rules are what a tiered policy's per-resource
	// evaluations run.
	if g.intn(2) == 0 || (tiered && g.intn(3) != 0) {
		for range 1 + g.intn(2) {
			t.Resources = append(t.Resources, g.gwResourceTarget())
		}
	}
	if t.Servers == nil && t.Tools == nil && t.Resources == nil {
		t.Tools = []string{pickFrom(g, gwTools...)}
	}
	return t
}

func (g *genSource) gwSelect() *Select {
	s := &Select{}
	switch g.intn(5) {
	case 0:
		s.Action = gwMaybeEmpty(g, gwList(g, gwActions))
	case 1:
		s.SideEffect = gwList(g, gwEffects)
	case 2:
		// Patterns never match "5" or "null", the stringified non-string
		// tool names, where the contract leaves open whether /re/ reads them.
		s.Tool = pickFrom(g, "/^mcp__db__/", "/(?i)bash/", "/Re/", "/^mcp__[a-z]+__[a-z_]+$/", "Read", "mcp__db__query", "/", "/x/")
		if g.rare(160) {
			s.Tool = pickFrom(g, "/(?=x)/", "/(/")
		}
	case 3:
		s.ResourceType = pickFrom(g, gwTypes...)
	default:
		s.Context = map[string]json.RawMessage{}
		for range 1 + g.intn(2) {
			s.Context[pickFrom(g, "region", "tier", "n")] = pickFrom(g, raw("eu"), raw("us"), raw(5), raw("5"), raw(true))
		}
		if g.rare(240) {
			s.Context[pickFrom(g, "", "a.b", "__proto__", "constructor")] = raw("eu")
		}
		if g.rare(240) {
			s.Context["region"] = pickFrom(g, json.RawMessage("null"), json.RawMessage("{}"), json.RawMessage("[1]"))
		}
	}
	return s
}

func (g *genSource) gwWindow() Window {
	w := Window{From: pickFrom(g, gwClocks...), To: pickFrom(g, gwClocks...), TimeZone: pickFrom(g, gwZones...)}
	if w.From == w.To && !g.rare(80) {
		w.To = "12:30"
		if w.From == w.To {
			w.To = "13:00"
		}
	}
	if g.intn(2) == 0 {
		w.Days = gwList(g, gwDays)
	}
	if g.rare(240) {
		switch g.intn(5) {
		case 0:
			w.Days = []string{pickFrom(g, "Mon", "monday", "xyz")}
		case 1:
			w.Days = []string{}
		case 2:
			w.From = pickFrom(g, "8:00", "24:00", "12:60", "1200", "")
		case 3:
			w.To = pickFrom(g, "08:0", "25:00", "ab:cd")
		default:
			w.TimeZone = pickFrom(g, "Mars/Olympus", "Europe/Nowhere")
		}
	}
	return w
}

func (g *genSource) gwLimit() *Limit {
	l := &Limit{Max: int64(1 + g.intn(4)), Window: pickFrom(g, gwWindows...), Per: pickFrom(g, "", "agent", "session", "namespace")}
	// Issue 30: a third of the limits are shared, some of them failOpen.
	switch g.intn(6) {
	case 0:
		l.Store = StoreLocal
	case 1, 2:
		l.Store, l.FailOpen = StoreShared, g.intn(3) == 0
	}
	if g.rare(160) {
		switch g.intn(5) {
		case 0:
			l.Max = pickFrom[int64](g, 0, -1)
		case 1:
			l.Window = pickFrom(g, gwBadWindows...)
		case 2:
			l.Store = pickFrom(g, "redis", "Shared")
		case 3:
			l.Store, l.FailOpen = pickFrom(g, "", StoreLocal), true
		default:
			l.Per = pickFrom(g, "pod", "Agent")
		}
	}
	return l
}

func (g *genSource) gwWhen() *When {
	w := &When{}
	switch g.intn(6) {
	case 0:
		for range 1 + g.intn(2) {
			w.Schedule = append(w.Schedule, g.gwWindow())
		}
	case 1:
		w.Environments = gwMaybeEmpty(g, gwList(g, gwEnvs))
	case 2:
		w.Sensitivity = gwMaybeEmpty(g, gwList(g, gwTags))
	case 3:
		w.ActorConfidence = gwList(g, gwConfidence)
	case 4:
		w.RateLimit = g.gwLimit()
	default:
		w.TokenBudget = g.gwLimit()
		w.TokenBudget.Max *= 100
	}
	return w
}

// gwLeaf tests the fields issue 9's requests add, resource.* above all.
func (g *genSource) gwLeaf() Condition {
	switch g.intn(8) {
	case 0:
		return Condition{Field: "resource.name", Operator: pickFrom(g, "eq", "neq"), Value: raw(pickFrom(g, gwNames...))}
	case 1:
		return Condition{Field: "resource.type", Operator: "eq", Value: raw(pickFrom(g, gwTypes...))}
	case 2:
		return Condition{Field: "resource.sensitivity", Operator: pickFrom(g, "contains", "not_contains"), Value: raw(pickFrom(g, gwTags...))}
	case 3:
		return Condition{Field: "resource", Operator: pickFrom(g, "exists", "not_exists")}
	case 4:
		return Condition{Field: "context.region", Operator: "eq", Value: raw(pickFrom(g, "eu", "us"))}
	case 5:
		return Condition{Field: "roles", Operator: "contains", Value: raw(pickFrom(g, gwRoles...))}
	case 6:
		return Condition{Field: "kwargs.amount", Operator: pickFrom(g, "lte", "gt"), Value: raw(1000)}
	}
	return g.condition()
}

func (g *genSource) gwGroup() Condition {
	c := Condition{}
	for range 1 + g.intn(3) {
		if g.intn(3) == 0 {
			all := Condition{}
			for range 1 + g.intn(2) {
				all.All = append(all.All, g.gwLeaf())
			}
			if g.rare(160) {
				all.All = append(all.All, Condition{Any: []Condition{g.gwLeaf()}})
			}
			c.Any = append(c.Any, all)
		} else {
			c.Any = append(c.Any, g.gwLeaf())
		}
	}
	if g.rare(240) {
		switch g.intn(2) {
		case 0:
			c.Any = []Condition{}
		default:
			c.Any = append(c.Any, Condition{Any: []Condition{g.gwLeaf()}})
		}
	}
	return c
}

func (g *genSource) gwRule(i int, tiered bool) Rule {
	r := Rule{ID: fmt.Sprintf("r%d", i), Effect: pickFrom(g, "allow", "deny", "warn", "audit", "allow", "deny", "ask")}
	if r.Effect == "ask" && g.intn(3) == 0 {
		r.Approval = &RuleApproval{Timeout: pickFrom(g, "", "30s", "1h", "90m", "soon", "-1s")}
	} else if g.rare(400) {
		r.Approval = &RuleApproval{}
	}
	if tiered || g.rare(240) {
		r.Priority = pickFrom[int32](g, 0, 0, 1, 1, 5, -1)
	}
	if g.rare(4) {
		r.Description = "rule " + r.ID
	}
	if g.intn(3) == 0 {
		r.Subjects = g.gwSubjects()
	}
	if g.intn(2) == 0 || (tiered && g.intn(2) == 0) {
		r.Targets = g.gwTargets(tiered)
	}
	if g.intn(4) == 0 {
		r.Select = g.gwSelect()
	}
	if g.intn(3) == 0 {
		r.When = g.gwWhen()
	}
	for range g.intn(3) {
		if g.intn(3) == 0 {
			r.Conditions = append(r.Conditions, g.gwGroup())
		} else {
			r.Conditions = append(r.Conditions, g.gwLeaf())
		}
	}
	if g.rare(400) {
		r.Effect = pickFrom(g, "block", "Warn")
	}
	return r
}

func (g *genSource) gwPolicy() Policy {
	p := Policy{ID: pickFrom(g, genPolicyNames...), Version: int64(g.intn(3)), Priority: pickFrom[int32](g, 0, 0, 1, -1),
		DefaultEffect: pickFrom(g, "allow", "deny", "", "")}
	tiered := g.intn(3) != 0
	if tiered {
		p.Evaluation = EvaluationTiered
	} else {
		p.Evaluation = pickFrom(g, "", EvaluationOrdered)
	}
	if g.rare(400) {
		p.Evaluation = pickFrom(g, "Tiered", "gateway")
	}
	for i := range 1 + g.intn(5) {
		p.Rules = append(p.Rules, g.gwRule(i, tiered))
	}
	return p
}

func (g *genSource) gwBundle(now time.Time) Bundle {
	var b Bundle
	for range 1 + g.intn(3) {
		b.Policies = append(b.Policies, g.gwPolicy())
	}
	if g.rare(10) {
		past := now.Add(-time.Minute)
		b.FrozenAgents = append(b.FrozenAgents, FrozenAgent{ID: pickFrom(g, gwAgents...), ExpiresAt: pickFrom[*time.Time](g, nil, &past)})
	}
	g.gwLevels(&b, now)
	return b
}

// gwLevels makes some policies ClusterPolicies or Audit (shadow) ones and
// adds PolicyExceptions naming the bundle's policies and rules (and some
// that name none), in force or expired, exactly at now included.
func (g *genSource) gwLevels(b *Bundle, now time.Time) {
	if g.intn(3) == 0 {
		return // a bundle of one level, as before ClusterPolicy
	}
	for i := range b.Policies {
		if g.intn(2) == 0 {
			b.Policies[i].Kind = KindClusterPolicy
		}
		if g.rare(6) {
			b.Policies[i].Mode = ModeAudit
		}
	}
	for i := range g.intn(4) {
		p := pickFrom(g, b.Policies...)
		x := Exception{Name: fmt.Sprintf("ex-%d", g.intn(3)+i), Policy: p.ID, PolicyKind: p.Kind,
			AgentIDs:  []string{pickFrom(g, gwAgents...)},
			ExpiresAt: now.Add(pickFrom(g, time.Hour, -time.Hour, 0))}
		if g.rare(8) {
			x.PolicyKind = pickFrom(g, "", KindClusterPolicy)
		}
		for range 1 + g.intn(2) {
			if len(p.Rules) > 0 {
				x.RuleIDs = append(x.RuleIDs, pickFrom(g, p.Rules...).ID)
			}
		}
		b.Exceptions = append(b.Exceptions, x)
	}
}

// gwUsage pre-fills earlier allowed calls around now: inside, on and past
// the edges of every generated window, and one in the future that no
// window counts.
func (g *genSource) gwUsage(now time.Time) *refUsage {
	u := &refUsage{}
	ages := []time.Duration{0, time.Second, 30 * time.Second, 89 * time.Second, 90 * time.Second, 59 * time.Minute,
		time.Hour, 2 * time.Hour, 23 * time.Hour, 24 * time.Hour, 6 * 24 * time.Hour, 40 * 24 * time.Hour, -time.Second}
	// A few agents and tools take most calls, so limits are reached.
	for range g.intn(16) {
		c := refUsed{At: now.Add(-pickFrom(g, ages...)), Agent: pickFrom(g, "agent-1", "AGENT-1", "build-agent", pickFrom(g, gwAgents...)),
			Session: pickFrom(g, gwSessions...), Tool: pickFrom(g, "Bash", "mcp__db__query", pickFrom(g, gwTools...)),
			Tokens: pickFrom[float64](g, 0, 50, 100, 150)}
		if g.rare(6) {
			c.Agent = ""
		}
		if g.rare(6) {
			c.Session = ""
		}
		u.calls = append(u.calls, c)
	}
	// The shared store: half the time on (shared limits read it), holding
	// some of this sidecar's calls and others'.
	u.sharedOn = g.intn(2) == 0
	for _, c := range u.calls {
		if g.intn(2) == 0 {
			u.shared = append(u.shared, c)
		}
	}
	for range g.intn(12) {
		u.shared = append(u.shared, refUsed{At: now.Add(-pickFrom(g, ages...)), Agent: pickFrom(g, "agent-1", "other-replica", pickFrom(g, gwAgents...)),
			Session: pickFrom(g, gwSessions...), Tool: pickFrom(g, "Bash", "mcp__db__query", pickFrom(g, gwTools...)),
			Tokens: pickFrom[float64](g, 0, 50, 100, 150)})
	}
	return u
}

func (g *genSource) gwResourceItem() any {
	m := map[string]any{"type": pickFrom(g, gwTypes...), "name": pickFrom(g, gwNames...)}
	if g.intn(2) == 0 {
		tags := []any{}
		for range 1 + g.intn(2) {
			tags = append(tags, pickFrom(g, gwTags...))
		}
		if g.rare(6) {
			tags = append(tags, 5.0, nil)
		}
		m["sensitivity"] = tags
	}
	if g.rare(5) {
		switch g.intn(6) {
		case 0:
			delete(m, "name")
		case 1:
			m["type"] = 5.0
		case 2:
			m["name"] = nil
		case 3:
			return pickFrom[any](g, "table/orders", nil, 5.0)
		case 4:
			m["sensitivity"] = "pii"
		default:
			return []any{"table", "orders"}
		}
	}
	return m
}

// gwRequest makes a request with issue 9's fields, present, absent or of
// the wrong type.
func (g *genSource) gwRequest() map[string]any {
	req := g.request()
	if g.intn(5) != 0 {
		req["tool_name"] = pickFrom(g, "Bash", "mcp__db__query", pickFrom(g, gwTools...), pickFrom(g, gwTools...))
	}
	if g.intn(4) != 0 {
		req["agent_id"] = pickFrom(g, "agent-1", pickFrom(g, gwAgents...), pickFrom(g, gwAgents...))
	}
	if g.intn(3) == 0 {
		req["session_id"] = pickFrom(g, gwSessions...)
	}
	switch g.intn(6) {
	case 0:
	case 1:
		req["roles"] = nil
	case 2:
		req["roles"] = []any{}
	case 3:
		req["roles"] = pickFrom[any](g, "ci", 5.0, map[string]any{"ci": true}, []any{5.0, "ci", nil})
	default:
		roles := []any{}
		for range 1 + g.intn(2) {
			roles = append(roles, pickFrom(g, gwRoles...))
		}
		req["roles"] = roles
	}
	switch g.intn(6) {
	case 0:
		req["server"] = pickFrom(g, gwServers...)
	case 1:
		req["server"] = pickFrom[any](g, 5.0, nil, "")
	}
	switch g.intn(6) {
	case 0:
	case 1:
		req["resources"] = pickFrom[any](g, nil, "table/orders", map[string]any{"type": "table", "name": "orders"}, []any{})
	default:
		list := []any{}
		for range 1 + g.intn(3) {
			list = append(list, g.gwResourceItem())
		}
		req["resources"] = list
	}
	if g.rare(4) {
		req["resource"] = map[string]any{"type": "table", "name": pickFrom(g, gwNames...)}
	}
	if g.intn(3) == 0 {
		req["action"] = pickFrom[any](g, "call", "read", "write", 5.0)
	}
	if g.intn(3) == 0 {
		req["side_effect"] = pickFrom[any](g, "read", "write", "delete", true)
	}
	if g.intn(3) == 0 {
		req["environment"] = pickFrom[any](g, "prod", "dev", nil)
	}
	if g.intn(3) == 0 {
		req["actor_confidence"] = pickFrom[any](g, "verified", "unknown", "low", 1.0)
	}
	if g.intn(3) == 0 {
		req["sensitivity"] = pickFrom[any](g, []any{"pii"}, []any{"public", 5.0}, "pii", []any{})
	}
	if g.intn(3) == 0 {
		req["context"] = pickFrom[any](g, map[string]any{"region": "eu", "n": 5.0}, map[string]any{"region": "us", "n": "5", "tier": true},
			map[string]any{}, "eu", map[string]any{"region": map[string]any{}})
	}
	if g.intn(3) == 0 {
		req["tokens"] = pickFrom[any](g, 0.0, 1.0, 50.0, 99.5, 100.0, 101.0, -5.0, "100", nil)
	}
	if g.intn(3) != 0 {
		g.castStrings(req)
	}
	return req
}

// Issue 28: result rules and outputs. A result case is a gateway bundle
// some of whose rules become result rules (redact among their effects,
// tests of output.* among their conditions), and requests that carry an
// output: text with secrets, structured values, isError and size.

var (
	genSecrets = []string{"AKIAZ7Q3XKDLR2M4WPNE", "bob@example.com", "4111 1111 1111 1111", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
		"ghp_0123456789abcdefghijABCDEFGHIJ012345", "DE89370400440532013000", "123-45-6789", "AKIA", "ünï"}
	genTexts = []string{"", "ok", "rm -rf /", `{"rows":3}`, "line\nbreak", "abcabc", "AKIAAKIA", "x", "ünïcode ünï", "5000"}
)

func (g *genSource) outputText() string {
	var b strings.Builder
	for range g.intn(5) {
		if g.intn(2) == 0 {
			b.WriteString(pickFrom(g, genSecrets...))
		} else {
			b.WriteString(pickFrom(g, genTexts...))
		}
		b.WriteString(pickFrom(g, " ", "", "\n", "; "))
	}
	return b.String()
}

func (g *genSource) output() any {
	if g.rare(12) {
		return pickFrom[any](g, nil, "text", []any{})
	}
	o := map[string]any{}
	if g.intn(8) != 0 {
		o[OutputText] = g.outputText()
	}
	if g.intn(2) == 0 {
		o[OutputStructured] = pickFrom[any](g, map[string]any{"rows": pickFrom[any](g, 3.0, 100.0, 101.0, "101", []any{1.0, 2.0})},
			map[string]any{"name": pickFrom(g, genSecrets...)}, []any{"a", 1.0}, nil, "plain")
	}
	if g.intn(2) == 0 {
		o[OutputIsError] = g.intn(2) == 0
	}
	if g.intn(2) == 0 {
		o[OutputSize] = pickFrom(g, 0.0, 10.0, 4096.0)
	}
	return o
}

// outputLeaf tests an output field, as result rules do.
func (g *genSource) outputLeaf() Condition {
	text := "output.text"
	switch g.intn(9) {
	case 0, 1:
		return Condition{Field: text, Operator: pickFrom(g, "contains", "not_contains", "starts_with", "ends_with"), Value: raw(pickFrom(g, append(genSecrets, genTexts...)...))}
	case 2, 3:
		return Condition{Field: text, Operator: "matches", Value: raw(pickFrom(g, `AKIA[0-9A-Z]{16}`, `[a-z]+@[a-z.]+`, `[0-9]{3}`, "ünï", "AKIA", "^rm", `(?s).`, "", `\d+|x`, `(?i)abc`))}
	case 4:
		c := Condition{Field: pickFrom(g, text, text, "output.structured.name", "input.command"), Operator: "detect"}
		if g.intn(2) == 0 {
			c.Value = raw(pickFrom(g, detect.Names()...))
		} else {
			for range 1 + g.intn(3) {
				c.Values = append(c.Values, raw(pickFrom(g, detect.Names()...)))
			}
		}
		if g.rare(20) {
			c.Value = raw(pickFrom(g, "aws", "", "JWT"))
		}
		return c
	case 5:
		return Condition{Field: pickFrom(g, text, "output", "output.structured"), Operator: pickFrom(g, "is_valid_json", "exists", "is_empty")}
	case 6:
		return Condition{Field: pickFrom(g, "output.structured.rows", "output.size"), Operator: pickFrom(g, "gt", "lte"), Value: raw(pickFrom(g, 100, 10))}
	case 7:
		return Condition{Field: "output.isError", Operator: pickFrom(g, "eq", "neq"), Value: raw(g.intn(2) == 0)}
	}
	return Condition{Field: pickFrom(g, "output.structured.rows", "output.structured.name", "output.text"), Operator: pickFrom(g, "exists", "not_exists")}
}

func (g *genSource) outputGroup() Condition {
	c := Condition{}
	for range 1 + g.intn(3) {
		if g.intn(3) == 0 {
			all := Condition{}
			for range 1 + g.intn(2) {
				all.All = append(all.All, g.outputLeaf())
			}
			c.Any = append(c.Any, all)
		} else {
			c.Any = append(c.Any, g.outputLeaf())
		}
	}
	return c
}

// resultBundle turns some of a gateway bundle's rules into result rules.
func (g *genSource) resultBundle(now time.Time) Bundle {
	b := g.gwBundle(now)
	for pi := range b.Policies {
		for ri := range b.Policies[pi].Rules {
			r := &b.Policies[pi].Rules[ri]
			if g.intn(3) == 0 {
				if g.rare(400) {
					r.Effect = "redact" // a call rule cannot redact
				}
				continue
			}
			r.Phase = PhaseResult
			if g.rare(400) {
				r.Phase = pickFrom[Phase](g, "Result", "after")
			}
			if r.Effect == "ask" || g.intn(2) == 0 {
				r.Effect, r.Approval = "redact", nil
			}
			if g.rare(400) {
				r.Effect = "ask"
			}
			if g.intn(2) == 0 {
				// Most result rules judge any call's result.
				r.Subjects, r.Targets, r.Select = nil, nil, nil
			}
			if w := r.When; w != nil && (w.RateLimit != nil || w.TokenBudget != nil) && !g.rare(30) {
				r.When = nil // a result rule counts nothing
			}
			if g.intn(2) == 0 {
				r.Conditions = nil
			}
			for range 1 + g.intn(2) {
				if g.intn(3) == 0 {
					r.Conditions = append(r.Conditions, g.outputGroup())
				} else {
					r.Conditions = append(r.Conditions, g.outputLeaf())
				}
			}
		}
	}
	return b
}

func (g *genSource) resultRequest() map[string]any {
	req := g.gwRequest()
	if !g.rare(16) {
		req[FieldOutput] = g.output()
	}
	return req
}
