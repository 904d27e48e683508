package regodiff

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/engine/detect"
)

var (
	fuzzBundles  = flag.Int("bundles", 400, "random bundles the differential test generates")
	fuzzRequests = flag.Int("requests", 60, "random requests per bundle")
	fuzzSeed     = flag.Uint64("seed", 1, "seed of the random bundles and requests")
	dumpDir      = flag.String("dump", "", "write the first mismatch's bundle, exported bundle and input here")
)

// The vocabulary is small so that conditions hold often, and holds what
// matters: number forms, unicode, types, <>& inside objects.
var (
	tools  = []string{"Bash", "bash", "pay", "mcp__db__query", "mcp__db__", "mcp____x", "mcp__github__create_issue", "tool_1", "5", ""}
	agents = []string{"agent-1", "Agent-1", "AGENT-K", "agent-\u212a", "agent-k", "\u017fam", "SAM", "sam", "\u03c3\u03c2", "\u03a3\u03a3", "\u03c3\u03c3", "stra\u00dfe", "", "\u0130x", "ix"}
	fields = []string{"tool_name", "agent_id", "input.command", "input.path", "input", "input.nested.deep", "kwargs.amount",
		"kwargs.flag", "kwargs.note", "kwargs", "args.0", "args.1.x", "args.1", "args.2", "args", "input.missing",
		"kwargs.amount.x", "session_id", "args.01", "resource.name", "resource.level", "resource", "in.if", "a-b.c d"}
	strs = []string{"Bash", "bash", "rm", "rm -rf /", "-rf", "ls", "a&&b", "&&", "<script>", "5000", "1000", "1e3", "abc",
		"true", "null", "", `{"a":1}`, "x", "agent-1", "[1,2]", "0x10", "NaN", " 1000", "\u212a", "\u00e9", "line\nbreak",
		"+5", ".5", "05", "-2.5e-1", `{"x":"n"}`, `"command":"rm -rf /"`, "5", "1e400", "1e-400", "123456789012345678901", "\u2028", "tab\there", "q\"uote\\"}
	numbers = []string{"5000", "5000.0", "5e3", "5E+3", "50000e-1", "999", "1000", "0", "-0", "-0.0", "-1", "1.5", "0.1", "1e21",
		"1e20", "1e-7", "1e-6", "0.000001", "123456789", "9007199254740993", "9007199254740992", "123456789012345678901",
		"12345678901234567890123", "1.7976931348623157e308", "5e-324", "0.1000000000000000055511151231257827", "2.5", "100000000000000000000.0", "-1.5e-10"}
	patterns = []string{"^rm", "rf /$", "^Bash$", "[0-9]+", "(?i)bash", "", "^$", "a&&b", `^\{`, "5000", `^[1-9][0-9]{3,}$`, "&&",
		"(?s).", "rm", "^ls$", `e\+21$`, `\d\.\d`, "(?i)k", "<", `^\[`, `\bdrop\s`, "(?i)^mcp__", `^"`, `\n`}
	badPatterns = []string{"(", "(?=x)", `(a)\1`, "x{1001}", "[z-a]"}
	roles       = []string{"analyst", "admin", "dev"}
	servers     = []string{"db", "github", "x"}
	resTypes    = []string{"table", "repo", "file"}
	resNames    = []string{"users", "orders", "main", "a"}
	tags        = []string{"pii", "secret", "public"}
	zones       = []string{"", "UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata"}
	days        = []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}
	operators   = append(append([]string{}, engine.Operators...), "bogus")
	// callOperators leave detect to resulty bundles (outputTest): the
	// other generators' streams stay what their coverage checks were
	// tuned on.
	callOperators = slices.DeleteFunc(slices.Clone(operators), func(o string) bool { return o == "detect" })
)

// gen writes random bundles and requests; asky ones (TestFuzzAsk) are
// mostly ask rules with fewer conditions, so that asks meet each other and
// the other effects often.
type gen struct {
	r    *rand.Rand
	asky bool
	// casty bundles (TestFuzzCast) have mostly castToNumber conditions,
	// few to a rule, so that they decide often.
	casty bool
	// resulty bundles (TestFuzzResults) have result rules (issue 28)
	// reading output and detect conditions; half their requests carry an
	// output (result evaluations).
	resulty bool
}

func (g *gen) n(k int) int { return g.r.IntN(k) }

// bad is a mistake's chance, pct in 100; a quarter of it in resulty
// bundles, whose rules have more to get wrong.
func (g *gen) bad(pct int) bool {
	if g.resulty {
		return g.r.IntN(400) < pct
	}
	return g.p(pct)
}
func (g *gen) p(pct int) bool      { return g.r.IntN(100) < pct }
func pick[T any](g *gen, xs []T) T { return xs[g.n(len(xs))] }

// share makes a third of the limits shared (issue 30), some failOpen: the
// export reads their counts under their own keys. It picks by the limit's
// own fields, not from g's stream, so the bundles the other coverage
// checks were tuned on stay as they were.
func (g *gen) share(l *engine.Limit) {
	switch h := mix(l.Window, fmt.Sprint(l.Max), l.Per); h % 6 {
	case 0:
		l.Store = engine.StoreLocal
	case 1, 2:
		l.Store, l.FailOpen = engine.StoreShared, h%5 < 2
	}
}

func (g *gen) some(xs []string, max int) []string {
	n := 1 + g.n(max)
	out := make([]string, n)
	for i := range out {
		out[i] = pick(g, xs)
	}
	return out
}

func jsonText(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// scalar is a condition value: mostly well typed for its operator.
func (g *gen) scalar() json.RawMessage {
	switch g.n(3) {
	case 0:
		return jsonText(pick(g, strs))
	case 1:
		return json.RawMessage(pick(g, numbers))
	}
	return json.RawMessage(pick(g, []string{"true", "false"}))
}

func (g *gen) test() engine.Condition {
	ops := operators
	if !g.resulty {
		ops = callOperators
	}
	c := engine.Condition{Field: pick(g, fields), Operator: pick(g, ops)}
	if g.resulty && c.Operator == "bogus" && !g.bad(100) {
		c.Operator = "exists"
	}
	if g.bad(2) {
		c.Field = pick(g, []string{"", "a..b", "__proto__", "x."})
	}
	switch c.Operator {
	case "eq", "neq":
		c.Value = g.scalar()
	case "in", "not_in":
		if g.p(20) {
			c.Value = g.scalar()
		} else {
			for range 1 + g.n(4) {
				c.Values = append(c.Values, g.scalar())
			}
		}
	case "contains", "not_contains", "starts_with", "ends_with":
		c.Value = jsonText(pick(g, strs))
	case "matches":
		c.Value = jsonText(pick(g, patterns))
		if g.p(3) {
			c.Value = jsonText(pick(g, badPatterns))
		}
	case "gt", "gte", "lt", "lte":
		c.Value = json.RawMessage(pick(g, numbers))
	case "detect":
		c.Value = jsonText(pick(g, detect.Names()))
	}
	if g.bad(3) { // a value of the wrong type, or one where none belongs
		c.Value = pick(g, []json.RawMessage{json.RawMessage("null"), json.RawMessage("{}"), json.RawMessage(`"x"`), json.RawMessage("7")})
	}
	if (g.p(12) && !g.resulty) || (g.casty && g.p(70)) {
		g.cast(&c)
	}
	return c
}

// Issue 28's castToNumber: strings it reads (spaces, '+', exponents, huge
// and tiny) and those it never does, as request values and condition
// values.
var (
	castStrs = []string{" 5000", "+5000", " 5e3 ", "\t1000\n", "5000", "1e3", "+1e3", "-0", "5000.0", "999", "\u000b7\f",
		"0x10", "inf", "Infinity", "NaN", "1_000", "", " ", "1e400", "-1e400", "+-5", "+", "05", ".5", "5.", "\u00a05000", "1e-400",
		"9007199254740993", " 123456789012345678901 ", "+0.1000000000000000055511151231257827", "1.7976931348623157e308"}
	castValues = []string{`5000`, `"5000"`, `" +5e3 "`, `1000`, `"1e3"`, `0`, `"-0"`, `"5.0e3"`, `"\t999\n"`, `1.5`, `"+1000"`, `"0.1"`,
		`"9007199254740993"`, `"123456789012345678901"`, `"1e-400"`}
)

// cast makes c a castToNumber condition, mostly on a field that holds
// numeric strings and with numeric values; sometimes one that does not
// compile.
func (g *gen) cast(c *engine.Condition) {
	c.CastToNumber = true
	switch c.Operator {
	case "eq", "neq", "gt", "gte", "lt", "lte", "in", "not_in":
	default:
		if !g.casty || g.bad(3) {
			return // castToNumber on another operator: a compile error
		}
		c.Operator = pick(g, []string{"eq", "neq", "gt", "gte", "lt", "lte", "in", "not_in"})
		c.Value, c.Values = nil, nil
	}
	if g.p(70) {
		c.Field = pick(g, []string{"kwargs.amount", "kwargs.note", "args.0", "input.command"})
	}
	value := func() json.RawMessage {
		if g.p(4) {
			return jsonText(pick(g, []string{"abc", "0x10", "NaN", "", "1e400"}))
		}
		return json.RawMessage(pick(g, castValues))
	}
	if (c.Operator == "in" || c.Operator == "not_in") && len(c.Value) == 0 {
		c.Values = c.Values[:0]
		for range 1 + g.n(3) {
			c.Values = append(c.Values, value())
		}
		return
	}
	c.Value, c.Values = value(), nil
}

func (g *gen) condition() engine.Condition {
	if !g.p(15) {
		return g.test()
	}
	var any []engine.Condition
	for range 1 + g.n(3) {
		if g.p(30) {
			var all []engine.Condition
			for range 1 + g.n(2) {
				all = append(all, g.test())
			}
			any = append(any, engine.Condition{All: all})
		} else {
			any = append(any, g.test())
		}
	}
	return engine.Condition{Any: any}
}

func (g *gen) rule(i int, tiered bool) engine.Rule {
	// ask as often as warn and audit, as in the engine's own generator.
	effects, conditions := []string{"allow", "deny", "deny", "warn", "audit", "ask"}, 4
	if g.asky {
		effects, conditions = []string{"ask", "ask", "allow", "deny", "warn", "audit"}, 2
	}
	if g.casty {
		conditions = 2
	}
	r := engine.Rule{ID: fmt.Sprintf("r%d", i), Effect: pick(g, effects)}
	if g.resulty && g.p(55) {
		conditions = 2
		r.Phase = engine.PhaseResult
		r.Effect = pick(g, []string{"deny", "redact", "redact", "warn", "audit", "allow"})
		switch n := g.n(400); {
		case n < 2:
			r.Effect = "ask" // a compile error on a result rule
		case n < 4:
			r.Phase = pick(g, []engine.Phase{"Result", "later"}) // compile errors
		}
	} else if g.resulty && g.n(200) == 0 {
		r.Effect = "redact" // a compile error on a call rule
	} else if g.resulty && g.p(5) {
		r.Phase = engine.PhaseCall
	}
	switch {
	case r.Effect == "ask" && g.p(60):
		// Timeouts in whole and fractional seconds and the maximum; a few
		// that do not compile (past the maximum, not a duration, not
		// positive), few enough not to make most asking policies fail.
		r.Approval = &engine.RuleApproval{Timeout: pick(g, []string{"", "30s", "1h", "1500ms", "2m30s", "1ns", "10m", "45s"})}
		if g.p(5) {
			r.Approval.Timeout = pick(g, []string{"90m", "soon", "-1s", "0s"})
		}
	case g.bad(1): // approval on a rule that does not ask: a compile error
		r.Approval = &engine.RuleApproval{}
	}
	if g.bad(2) {
		r.ID = pick(g, []string{"", "Bad_ID", "r0"})
	}
	if g.bad(1) {
		r.Effect = "block"
	}
	if g.p(30) {
		r.Description = pick(g, []string{"no <b>", "caf\u00e9 \"q\"", "d"})
	}
	if tiered {
		r.Priority = int32(g.n(3))
	} else if g.bad(1) {
		r.Priority = 1 // a compile error in an ordered policy
	}
	gate := 40
	if tiered {
		gate = 75
	}
	if g.p(gate) {
		g.gateway(&r, tiered)
		if r.Phase == engine.PhaseResult && r.When != nil && (r.When.RateLimit != nil || r.When.TokenBudget != nil) && !g.p(5) {
			r.When = nil // limits are only for call rules: mostly left out
		}
	}
	for range g.n(conditions) {
		if g.resulty && g.p(80) {
			r.Conditions = append(r.Conditions, g.outputTest())
			continue
		}
		r.Conditions = append(r.Conditions, g.condition())
	}
	return r
}

// outputTest reads a result's output (issue 28), or detects a secret in
// output.text or a call's field.
func (g *gen) outputTest() engine.Condition {
	detectors := append(detect.Names(), "bogus")
	switch g.n(9) {
	case 0, 1, 6, 7:
		c := engine.Condition{Field: pick(g, []string{"output.text", "output.text", "output.text", "input.command"}), Operator: "detect"}
		if g.p(50) {
			c.Value = jsonText(pick(g, detectors[:len(detectors)-1]))
			if g.p(2) {
				c.Value = jsonText("bogus")
			}
		} else {
			seen := map[string]bool{}
			for _, n := range g.some(detectors[:len(detectors)-1], 3) {
				if !seen[n] {
					seen[n] = true
					c.Values = append(c.Values, jsonText(n))
				}
			}
		}
		return c
	case 2:
		return engine.Condition{Field: "output.text", Operator: pick(g, []string{"contains", "not_contains", "matches"}),
			Value: jsonText(pick(g, []string{"AKIA", "4111", "@", "BEGIN", "x", "[0-9]{3}-[0-9]{2}", "(?i)token", "^$"}))}
	case 3:
		return engine.Condition{Field: "output.isError", Operator: pick(g, []string{"eq", "neq"}), Value: jsonText(g.p(50))}
	case 4:
		return engine.Condition{Field: "output.size", Operator: pick(g, []string{"gt", "lte"}), Value: jsonText(pick(g, []int{0, 100, 1024}))}
	case 5:
		c := engine.Condition{Field: pick(g, []string{"output.structured.count", "output.structured.ok", "output.structured"}),
			Operator: pick(g, []string{"gt", "eq", "exists", "is_valid_json", "not_exists"})}
		switch c.Operator {
		case "gt":
			c.Value = jsonText(3)
		case "eq":
			c.Value = jsonText(pick(g, []any{5, true, "7"}))
		}
		return c
	}
	return engine.Condition{Field: pick(g, []string{"output.text", "output"}), Operator: pick(g, []string{"exists", "is_empty", "is_valid_json"})}
}

// output is a result's output: text made of secrets and near misses,
// isError, size and structured content.
func (g *gen) output() string {
	var b strings.Builder
	for range g.n(4) {
		b.WriteString(detectFragments[g.n(len(detectFragments))])
		b.WriteString(pick(g, []string{" ", "\n", ", ", "="}))
	}
	items := []string{`"text":` + string(jsonText(b.String()))}
	if g.p(50) {
		items = append(items, `"isError":`+pick(g, []string{"true", "false"}))
	}
	if g.p(50) {
		items = append(items, fmt.Sprintf(`"size":%d`, g.n(2048)))
	}
	if g.p(40) {
		items = append(items, `"structured":`+pick(g, []string{`{"count":5,"ok":true}`, `{"count":"7"}`, `[1,2]`, `"{\"a\":1}"`, `null`}))
	}
	if g.p(5) {
		items = items[1:] // no text
	}
	return "{" + strings.Join(items, ",") + "}"
}

func (g *gen) gateway(r *engine.Rule, tiered bool) {
	if g.p(30) {
		s := &engine.Subjects{}
		if g.p(60) {
			s.Agents = g.some(agents[:12], 2)
		}
		if s.Agents == nil || g.p(40) {
			s.Roles = g.some(roles, 2)
		}
		r.Subjects = s
	}
	if g.p(50) {
		t := &engine.Targets{}
		if g.p(40) {
			t.Servers = g.some(servers, 2)
		}
		if g.p(30) {
			t.Tools = g.some(tools[:9], 2)
		}
		if g.p(50) || (t.Servers == nil && t.Tools == nil) {
			for range 1 + g.n(2) {
				t.Resources = append(t.Resources, engine.ResourceTarget{Type: pick(g, resTypes), Names: g.some(resNames, 2)})
			}
		}
		r.Targets = t
	}
	if g.p(30) {
		s := &engine.Select{}
		switch g.n(6) {
		case 0:
			s.Action = g.some([]string{"call", "read", "write"}, 2)
		case 1:
			s.SideEffect = g.some([]string{"read", "write"}, 1)
		case 2:
			s.Tool = pick(g, []string{"pay", "/^mcp__db__/", "/(?i)BASH/", "Bash"})
		case 3:
			s.ResourceType = pick(g, resTypes)
		default:
			s.Context = map[string]json.RawMessage{pick(g, []string{"env", "team"}): g.scalar()}
		}
		r.Select = s
	}
	if g.p(30) {
		w := &engine.When{}
		switch g.n(6) {
		case 0:
			win := engine.Window{From: pick(g, []string{"08:00", "22:00", "00:00", "12:30"}), To: pick(g, []string{"18:00", "06:00", "23:59", "12:31"}), TimeZone: pick(g, zones)}
			if g.p(60) {
				win.Days = g.some(days, 3)
			}
			w.Schedule = []engine.Window{win}
		case 1:
			w.Environments = g.some([]string{"prod", "dev"}, 1)
		case 2:
			w.Sensitivity = g.some(tags, 2)
		case 3:
			w.ActorConfidence = g.some([]string{"unknown", "high", "low"}, 2)
		case 4:
			w.RateLimit = &engine.Limit{Max: int64(1 + g.n(5)), Window: pick(g, []string{"1m", "90s", "1h", "7d"}), Per: pick(g, []string{"", "agent", "session", "namespace"})}
			g.share(w.RateLimit)
		default:
			w.TokenBudget = &engine.Limit{Max: int64(500 + g.n(1500)), Window: pick(g, []string{"1h", "24h"}), Per: pick(g, []string{"", "session", "namespace"})}
			g.share(w.TokenBudget)
		}
		r.When = w
	}
}

func (g *gen) bundle(now time.Time) engine.Bundle {
	var b engine.Bundle
	names := []string{"alpha", "beta", "gamma", "delta"}
	policies := g.n(5)
	if g.asky || g.resulty { // fewer NO_POLICIES and policies without rules (compile errors)
		policies = 1 + g.n(4)
	}
	for i := range policies { // 0 to 4 policies: none is NO_POLICIES
		p := engine.Policy{ID: names[i], Priority: int32(pick(g, []int{0, 10, 10, 20})), Version: int64(g.n(3)),
			DefaultEffect: pick(g, []string{"", "allow", "deny"})}
		if g.p(1) {
			p.DefaultEffect = "maybe"
		}
		tiered := g.p(35)
		if tiered {
			p.Evaluation = engine.EvaluationTiered
		} else if g.p(20) {
			p.Evaluation = engine.EvaluationOrdered
		}
		rules := g.n(7) // 0 rules does not compile
		if g.asky || g.resulty {
			rules = 1 + g.n(6)
		}
		for j := range rules {
			p.Rules = append(p.Rules, g.rule(j, tiered))
		}
		b.Policies = append(b.Policies, p)
	}
	for range g.n(3) {
		f := engine.FrozenAgent{ID: pick(g, agents)}
		if g.p(20) {
			f.Reason = "stop \u00e9"
		}
		if g.p(60) {
			at := now.Add(time.Duration(g.n(7)-3) * time.Hour)
			f.ExpiresAt = &at
		}
		if g.p(10) {
			f.ServiceAccount = "sa-1"
		}
		b.FrozenAgents = append(b.FrozenAgents, f)
	}
	g.levels(&b, now)
	return b
}

// levels makes some policies ClusterPolicies or Audit (shadow) ones, as the
// engine's own generator does (gwLevels), and adds PolicyExceptions naming
// the bundle's policies and rules (and some naming none), in force or
// expired, exactly at the bundle's instant included (requests are decided
// up to 5 hours either side of it). Some name ServiceAccounts: OPA gets no
// caller-vouched ServiceAccount, so the engine is asked for a caller that
// vouches for none, and those must never apply in the Rego either.
func (g *gen) levels(b *engine.Bundle, now time.Time) {
	if g.n(3) == 0 || len(b.Policies) == 0 {
		return // one level, as before ClusterPolicy
	}
	for i := range b.Policies {
		if g.p(50) {
			b.Policies[i].Kind = engine.KindClusterPolicy
		}
		if g.p(15) {
			b.Policies[i].Mode = engine.ModeAudit
		}
	}
	if len(b.Policies) > 1 && g.p(10) { // a ClusterPolicy and a Policy of the same name
		b.Policies[1].ID = b.Policies[0].ID
		b.Policies[1].Kind = map[string]string{"": engine.KindClusterPolicy, engine.KindClusterPolicy: ""}[b.Policies[0].Kind]
	}
	for i := range 1 + g.n(4) {
		p := pick(g, b.Policies)
		x := engine.Exception{Name: fmt.Sprintf("ex-%d", g.n(3)+i), Policy: p.ID, PolicyKind: p.Kind,
			AgentIDs:  g.some(agents[:12], 6),
			ExpiresAt: now.Add(pick(g, []time.Duration{time.Hour, -time.Hour, 0, 3 * time.Hour}))}
		if g.p(10) {
			x.PolicyKind = pick(g, []string{"", engine.KindClusterPolicy})
		}
		if g.p(5) {
			x.Policy = "nothing"
		}
		if g.p(15) {
			x.ServiceAccounts = []string{"sa-1"}
			if g.p(50) {
				x.AgentIDs = nil
			}
		}
		if g.p(40) { // every rule of the policy: whichever held is exempted
			for _, r := range p.Rules {
				x.RuleIDs = append(x.RuleIDs, r.ID)
			}
		}
		for range 1 + g.n(2) {
			if len(p.Rules) > 0 && !g.p(5) {
				x.RuleIDs = append(x.RuleIDs, pick(g, p.Rules).ID)
			} else {
				x.RuleIDs = append(x.RuleIDs, "r9")
			}
		}
		b.Exceptions = append(b.Exceptions, x)
	}
}

// value writes a random JSON value as text, numbers in every form.
func (g *gen) value(depth int) string {
	switch k := g.n(9); {
	case k < 3:
		return string(jsonText(pick(g, strs)))
	case k < 5:
		return pick(g, numbers)
	case k == 5:
		return pick(g, []string{"true", "false", "null"})
	case k == 6 && depth < 3:
		var items []string
		for range g.n(4) {
			items = append(items, g.value(depth+1))
		}
		return "[" + strings.Join(items, ",") + "]"
	case depth < 3:
		return g.object(depth+1, []string{"x", "a", "b", "<", "z", "command", "deep", "\u00e9"})
	}
	return `"leaf"`
}

func (g *gen) object(depth int, keys []string) string {
	var items []string
	seen := map[string]bool{}
	for range g.n(4) {
		k := pick(g, keys)
		if seen[k] {
			continue
		}
		seen[k] = true
		items = append(items, string(jsonText(k))+":"+g.value(depth))
	}
	return "{" + strings.Join(items, ",") + "}"
}

func (g *gen) request() []byte {
	var items []string
	add := func(k, v string) { items = append(items, string(jsonText(k))+":"+v) }
	if !g.p(5) {
		if g.p(5) {
			add("tool_name", g.value(2))
		} else {
			add("tool_name", string(jsonText(pick(g, tools))))
		}
	}
	if g.p(85) {
		if g.p(5) {
			add("agent_id", g.value(2))
		} else {
			add("agent_id", string(jsonText(pick(g, agents))))
		}
	}
	if g.p(50) {
		add("session_id", string(jsonText(pick(g, []string{"s1", "s2", ""}))))
	}
	if g.p(80) {
		add("input", g.object(1, []string{"command", "path", "nested", "sql", "x"}))
	}
	if g.p(60) || g.casty {
		if g.p(50) || (g.casty && g.p(80)) {
			add("kwargs", fmt.Sprintf(`{"amount":%s,"note":%s}`, jsonText(pick(g, castStrs)), g.castValue()))
		} else {
			add("kwargs", g.object(1, []string{"amount", "flag", "note"}))
		}
	}
	if g.p(40) {
		if g.p(30) {
			add("args", fmt.Sprintf("[%s]", g.castValue()))
		} else {
			add("args", g.value(0))
		}
	}
	if g.p(30) {
		add("roles", pick(g, []string{`["analyst"]`, `["dev","admin"]`, `[]`, `"analyst"`, `[1,"dev"]`}))
	}
	if g.p(20) {
		add("server", pick(g, []string{`"db"`, `"github"`, `5`, `null`}))
	}
	if g.p(20) {
		add("action", pick(g, []string{`"read"`, `"write"`, `"call"`, `1`}))
	}
	if g.p(30) {
		add("side_effect", pick(g, []string{`"read"`, `"write"`, `true`}))
	}
	if g.p(20) {
		add("environment", pick(g, []string{`"prod"`, `"dev"`, `[]`}))
	}
	if g.p(20) {
		add("actor_confidence", pick(g, []string{`"high"`, `"low"`, `"unknown"`, `3`}))
	}
	if g.p(30) {
		add("sensitivity", pick(g, []string{`["pii"]`, `["public","secret"]`, `"pii"`, `[1]`}))
	}
	if g.p(20) {
		add("context", pick(g, []string{`{"env":"prod"}`, `{"team":5000}`, `{"env":true,"team":"x"}`, `[1]`, `{"team":"5e3"}`}))
	}
	if g.p(40) {
		var rs []string
		for range g.n(4) {
			rs = append(rs, pick(g, []string{
				fmt.Sprintf(`{"type":%q,"name":%q}`, pick(g, resTypes), pick(g, resNames)),
				fmt.Sprintf(`{"type":%q,"name":%q,"sensitivity":["pii"],"level":%s}`, pick(g, resTypes), pick(g, resNames), pick(g, numbers)),
				`{"type":"table"}`, `"users"`, `{"type":1,"name":"users"}`,
			}))
		}
		add("resources", "["+strings.Join(rs, ",")+"]")
	}
	if g.p(20) {
		add("tokens", pick(g, []string{"100", "1e3", "-5", "0.5", `"100"`, "2000"}))
	}
	if g.p(5) {
		add("resource", g.object(1, []string{"name", "level"}))
	}
	if g.resulty && g.p(50) {
		add("output", g.output())
	}
	return []byte("{" + strings.Join(items, ",") + "}")
}

// castValue is a request value for castToNumber: mostly a numeric string.
func (g *gen) castValue() string {
	if g.p(70) {
		return string(jsonText(pick(g, castStrs)))
	}
	return g.value(2)
}

// TestFuzz compares OPA and the engine on random bundles and requests:
// every operator, missing fields, numbers in every JSON form, unicode,
// frozen agents with expiry, compile errors, several policies with
// priorities and defaults, tiered policies with every gateway filter, ask
// rules with their approval timeouts, two levels (ClusterPolicies),
// PolicyExceptions and shadow (Audit) policies.
func TestFuzz(t *testing.T) {
	compared, exercised := fuzz(t, &gen{r: rand.New(rand.NewPCG(*fuzzSeed, 2))}, *fuzzBundles)
	for _, k := range []string{"bundle reads shared/", "bundle reads namespace/"} {
		if exercised[k] < *fuzzBundles/100 {
			t.Errorf("only %d limit counts of %d bundles: %s; the generator no longer exercises it", exercised[k], *fuzzBundles, k)
		}
	}
	t.Logf("limit counts read: shared %d, per namespace %d", exercised["bundle reads shared/"], exercised["bundle reads namespace/"])
	for _, k := range []string{"matchedPolicyKind", "exceptionApplied", "shadow", "ask"} {
		if exercised[k] < compared/1000 {
			t.Errorf("only %d of %d answers have %s: the generator no longer exercises it", exercised[k], compared, k)
		}
	}
	// The kinds of ask come in lumps (a bundle whose ask rule matches
	// often), so they are only required to occur here; TestFuzzAsk
	// requires them in numbers.
	for _, k := range []string{"ask/tiered", "ask/ClusterPolicy", "ask/timeout", "shadow/ask"} {
		if exercised[k] == 0 {
			t.Errorf("none of %d answers has %s: the generator no longer exercises it", compared, k)
		}
	}
	if compared < 20000 && *fuzzBundles**fuzzRequests >= 24000 {
		t.Errorf("only %d requests compared, want at least 20,000", compared)
	}
}

// TestFuzzAsk is TestFuzz on bundles of mostly ask rules with fewer
// conditions: two asks in one policy, an ask and a later deny or allow, a
// scoped ask and a missing agent_id, asks on both levels and in Audit
// policies meet often, where TestFuzz (ask as often as warn) meets them
// by the dozen.
func TestFuzzAsk(t *testing.T) {
	compared, exercised := fuzz(t, &gen{r: rand.New(rand.NewPCG(*fuzzSeed, 3)), asky: true}, *fuzzBundles/4)
	for _, k := range []string{"ask", "ask/tiered", "ask/ClusterPolicy", "ask/timeout", "ask/warnings", "shadow/ask"} {
		if exercised[k] < compared/100 {
			t.Errorf("only %d of %d answers have %s: the generator no longer exercises it", exercised[k], compared, k)
		}
	}
}

// TestFuzzCast is TestFuzz on bundles of mostly castToNumber conditions
// (issue 28), few to a rule, over requests whose numeric fields hold
// numeric strings with spaces, '+' and exponents, and strings that never
// parse ("0x10", "NaN", "1_000", "1e400").
func TestFuzzCast(t *testing.T) {
	compared, exercised := fuzz(t, &gen{r: rand.New(rand.NewPCG(*fuzzSeed, 4)), casty: true}, *fuzzBundles/4)
	if exercised["cast"] < compared/100 {
		t.Errorf("only %d of %d answers were decided by a rule with castToNumber: the generator no longer exercises it", exercised["cast"], compared)
	}
}

// TestFuzzResults is TestFuzz on bundles with result rules (issue 28):
// phase result with deny, redact, warn, audit and allow over output.text,
// output.isError, output.size and output.structured, detect conditions in
// rules of both phases, and half the requests carrying an output (result
// evaluations): OPA decides as the engine does (the redaction spans, the
// delivered output and the explanations are the engine's alone).
func TestFuzzResults(t *testing.T) {
	compared, exercised := fuzz(t, &gen{r: rand.New(rand.NewPCG(*fuzzSeed, 5)), resulty: true}, *fuzzBundles/4)
	t.Logf("results: %v", exercised)
	for _, k := range []string{"redact", "result/deny", "result/allow", "detect"} {
		if exercised[k] < compared/300 {
			t.Errorf("only %d of %d answers have %s: the generator no longer exercises it", exercised[k], compared, k)
		}
	}
}

// fuzz decides the random requests of `bundles` random bundles with OPA and the
// engine, reports every difference, and returns how many requests it
// compared and what their answers exercised.
func fuzz(t *testing.T, g *gen, bundles int) (int, map[string]int) {
	base := time.Date(2026, 11, 16, 7, 0, 0, 0, time.UTC)
	compared, refused, failures := 0, 0, 0
	// Answers that show a level, an exception, a shadow verdict or an ask:
	// the generator must keep exercising them.
	exercised := map[string]int{}
	for range bundles {
		now := base.Add(time.Duration(g.n(7*24*4)) * 15 * time.Minute)
		b := g.bundle(now)
		p, err := prepare(t, b)
		if err != nil {
			refused++
			t.Errorf("refused a bundle the generator means to be exportable: %v", err)
			continue
		}
		// Issue 30's limits: counted per bundle whose export reads them.
		for _, k := range append(slices.Clone(p.counts.calls), p.counts.tokens...) {
			for _, prefix := range []string{"shared/", "namespace/"} {
				if strings.HasPrefix(k, prefix) {
					exercised["bundle reads "+prefix]++
				}
			}
		}
		u := usage{seed: g.r.Uint64()}
		for range *fuzzRequests {
			at := now
			if g.p(30) {
				at = now.Add(time.Duration(g.n(600)-300) * time.Minute)
			}
			doc := g.request()
			var use engine.Usage = u
			if g.p(10) {
				use = nil
			}
			ok, err := p.compare(t, doc, at, use)
			if err != nil {
				failures++
				if failures <= 5 {
					bj, _ := json.Marshal(b)
					t.Errorf("%v\nbundle: %s", err, bj)
				}
				if failures == 1 && *dumpDir != "" {
					dump(t, *dumpDir, p, b, doc, at, use)
				}
			}
			if ok {
				compared++
				for _, k := range []string{"matchedPolicyKind", "exceptionApplied", "shadow"} {
					if _, in := p.answer[k]; in {
						exercised[k]++
					}
				}
				countAsks(&b, p.answer, exercised)
				countCasts(&b, p.answer, exercised)
				countResults(&b, p.answer, doc, exercised)
			}
		}
	}
	t.Logf("fuzz: %d requests compared over %d bundles, %d mismatches, %d refused; answers with matchedPolicyKind %d, exceptionApplied %d, shadow %d; "+
		"ask decisions %d (by a tiered policy %d, by a ClusterPolicy %d, with another timeout than 5m %d, with warnings %d), shadow asks %d; "+
		"decided by a rule with castToNumber %d",
		compared, bundles, failures, refused, exercised["matchedPolicyKind"], exercised["exceptionApplied"], exercised["shadow"],
		exercised["ask"], exercised["ask/tiered"], exercised["ask/ClusterPolicy"], exercised["ask/timeout"], exercised["ask/warnings"], exercised["shadow/ask"],
		exercised["cast"])
	return compared, exercised
}

// countResults counts result evaluations by their decision, redact
// decisions, and answers decided by a rule with a detect condition.
func countResults(b *engine.Bundle, answer map[string]any, doc []byte, exercised map[string]int) {
	if strings.Contains(string(doc), `"output":`) {
		exercised["result/"+answer["decision"].(string)]++
		if code, ok := answer["code"].(string); ok && answer["decision"] == "deny" {
			exercised["result/deny/"+code]++
		}
	}
	if answer["effect"] == "redact" {
		exercised["redact"]++
	}
	var detects func(cs []engine.Condition) bool
	detects = func(cs []engine.Condition) bool {
		return slices.ContainsFunc(cs, func(c engine.Condition) bool { return c.Operator == "detect" || detects(c.Any) || detects(c.All) })
	}
	for _, p := range b.Policies {
		for _, r := range p.Rules {
			if p.ID == answer["matchedPolicyId"] && r.ID == answer["matchedRuleId"] && detects(r.Conditions) {
				exercised["detect"]++
				return
			}
		}
	}
}

// countCasts counts answers whose matched rule has a castToNumber
// condition (issue 28).
func countCasts(b *engine.Bundle, answer map[string]any, exercised map[string]int) {
	var casts func(cs []engine.Condition) bool
	casts = func(cs []engine.Condition) bool {
		for _, c := range cs {
			if c.CastToNumber || casts(c.Any) || casts(c.All) {
				return true
			}
		}
		return false
	}
	for _, p := range b.Policies {
		if p.ID != answer["matchedPolicyId"] {
			continue
		}
		for _, r := range p.Rules {
			if r.ID == answer["matchedRuleId"] && casts(r.Conditions) {
				exercised["cast"]++
				return
			}
		}
	}
}

// countAsks counts, in the engine's answer for bundle b, what the ask
// rules exercise: ask decisions, by a tiered policy, by a ClusterPolicy,
// with a timeout other than the default, with warnings, and asks among
// shadow verdicts.
func countAsks(b *engine.Bundle, answer map[string]any, exercised map[string]int) {
	if answer["decision"] == "ask" {
		exercised["ask"]++
		kind, _ := answer["matchedPolicyKind"].(string)
		for _, p := range b.Policies {
			if p.ID == answer["matchedPolicyId"] && p.Cluster() == (kind == engine.KindClusterPolicy) && !p.Audit() && p.Tiered() {
				exercised["ask/tiered"]++
			}
		}
		if kind == engine.KindClusterPolicy {
			exercised["ask/ClusterPolicy"]++
		}
		if answer["approvalTimeoutSeconds"] != engine.DefaultApprovalTimeout.Seconds() {
			exercised["ask/timeout"]++
		}
		if _, in := answer["warnings"]; in {
			exercised["ask/warnings"]++
		}
	}
	shadow, _ := answer["shadow"].([]any)
	for _, v := range shadow {
		if v.(map[string]any)["decision"] == "ask" {
			exercised["shadow/ask"]++
		}
	}
}

func dump(t *testing.T, dir string, p *pair, b engine.Bundle, doc []byte, at time.Time, u engine.Usage) {
	bj, _ := json.MarshalIndent(b, "", " ")
	_ = os.MkdirAll(dir, 0o755)
	_ = os.WriteFile(filepath.Join(dir, "bundle.json"), bj, 0o644)
	var in map[string]any
	_ = json.Unmarshal(doc, &in)
	in["now"] = at.Format(time.RFC3339Nano)
	if u != nil {
		req, _ := engine.DecodeRequest(doc)
		in["counts"] = countsFor(req, u, at, p.counts.calls, p.counts.tokens)
	}
	ij, _ := json.Marshal(in)
	_ = os.WriteFile(filepath.Join(dir, "input.json"), ij, 0o644)
	if err := p.exported.WriteDir(filepath.Join(dir, "opa")); err != nil {
		t.Log(err)
	}
}
