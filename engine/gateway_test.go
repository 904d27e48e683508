package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

// Table tests of issue 9's gateway model (section 6) against the real
// engine. Every case also holds the reference evaluator to the same
// expectation, so the differential fuzz compares the engine with something
// these hand-written answers vouch for.

// gwExpect is a whole result as the contract fixes it. Reason is compared
// exactly; version 0 means 1 when a policy is named.
type gwExpect struct {
	decision Decision
	effect   Effect
	policy   string
	version  int64
	rule     string
	resource ResourceRef
	code     Code
	reason   string
	warnings []string
}

type gwCase struct {
	name     string
	policies []Policy
	req      string // JSON
	now      time.Time
	usage    *refUsage
	want     gwExpect
}

func gwRequest(tb testing.TB, doc string) map[string]any {
	tb.Helper()
	if req, err := DecodeRequest([]byte(doc)); err == nil {
		return req
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(doc), &m); err != nil || m == nil {
		tb.Fatalf("request %s: %v", doc, err)
	}
	return m
}

func runGatewayCases(t *testing.T, cases []gwCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := Bundle{Policies: tc.policies}
			c, diags := Compile(b)
			if len(diags) > 0 {
				t.Fatalf("unexpected diagnostics: %v", diags)
			}
			now := tc.now
			if now.IsZero() {
				now = t0
			}
			req := gwRequest(t, tc.req)
			var usage Usage
			if tc.usage != nil {
				usage = tc.usage
			}
			want := refResult{refOutcome: refOutcome{Decision: tc.want.decision, Code: tc.want.code,
				PolicyID: tc.want.policy, RuleID: tc.want.rule}, Effect: tc.want.effect, Resource: tc.want.resource,
				Reason: tc.want.reason, Warnings: tc.want.warnings}
			if want.PolicyID != "" {
				want.Version = max(tc.want.version, 1)
			}
			shared, _ := tc.usage.sharedFor(b, req, now)
			record(t, b, Request(req), now, usage, shared)
			for _, explain := range []bool{false, true} {
				shared, asked := tc.usage.sharedFor(b, req, now)
				res := c.Evaluate(Request(req), EvalOptions{Now: fixedClock(now), Usage: usage, Shared: shared, Explain: explain})
				if msg := compareGateway(res, want); msg != "" {
					t.Errorf("engine, explain=%v: %s", explain, msg)
				}
				if asked != nil && len(asked.problems) > 0 {
					t.Errorf("engine, explain=%v: shared usage asked amiss: %v", explain, asked.problems)
				}
				checkInvariants(t, res)
			}
			if msg := compareGateway(refResultAsEngine(refGateway(b, req, now, tc.usage)), want); msg != "" {
				t.Errorf("reference: %s", msg)
			}
		})
	}
}

// refResultAsEngine lets compareGateway judge the reference too.
func refResultAsEngine(r refResult) Result {
	return Result{Decision: r.Decision, Effect: r.Effect, Code: r.Code, MatchedPolicyID: r.PolicyID,
		MatchedPolicyVersion: r.Version, MatchedRuleID: r.RuleID, MatchedResource: r.Resource, Reason: r.Reason, Warnings: r.Warnings}
}

// Builders: a rule is an id, an effect and options.

type ruleOpt func(*Rule)

func gwRule(id, effect string, opts ...ruleOpt) Rule {
	r := Rule{ID: id, Effect: effect}
	for _, o := range opts {
		o(&r)
	}
	return r
}

func tiered(id string, rules ...Rule) Policy {
	return Policy{ID: id, Version: 1, Evaluation: EvaluationTiered, Rules: rules}
}

func ordered(id string, rules ...Rule) Policy {
	return Policy{ID: id, Version: 1, Rules: rules}
}

func withPriority(p int32) ruleOpt     { return func(r *Rule) { r.Priority = p } }
func withDescription(d string) ruleOpt { return func(r *Rule) { r.Description = d } }
func withAgents(a ...string) ruleOpt {
	return func(r *Rule) {
		if r.Subjects == nil {
			r.Subjects = &Subjects{}
		}
		r.Subjects.Agents = a
	}
}

func withRoles(roles ...string) ruleOpt {
	return func(r *Rule) {
		if r.Subjects == nil {
			r.Subjects = &Subjects{}
		}
		r.Subjects.Roles = roles
	}
}

func targets(r *Rule) *Targets {
	if r.Targets == nil {
		r.Targets = &Targets{}
	}
	return r.Targets
}

func withServers(s ...string) ruleOpt { return func(r *Rule) { targets(r).Servers = s } }
func withTools(s ...string) ruleOpt   { return func(r *Rule) { targets(r).Tools = s } }
func boundTo(typ string, names ...string) ruleOpt {
	return func(r *Rule) {
		targets(r).Resources = append(targets(r).Resources, ResourceTarget{Type: typ, Names: names})
	}
}

func withSelect(s Select) ruleOpt      { return func(r *Rule) { r.Select = &s } }
func withWhen(w When) ruleOpt          { return func(r *Rule) { r.When = &w } }
func withConds(c ...Condition) ruleOpt { return func(r *Rule) { r.Conditions = c } }

// Expectations.

func allowedBy(policy, rule string) gwExpect {
	return gwExpect{decision: Allow, effect: EffectAllow, policy: policy, rule: rule}
}

func deniedBy(policy, rule string) gwExpect {
	return gwExpect{decision: Deny, effect: EffectDeny, policy: policy, rule: rule,
		reason: fmt.Sprintf("denied by rule %q of policy %q", rule, policy)}
}

func warnedBy(policy, rule string) gwExpect {
	reason := fmt.Sprintf("warned by rule %q of policy %q", rule, policy)
	return gwExpect{decision: Allow, effect: EffectWarn, policy: policy, rule: rule, reason: reason, warnings: []string{reason}}
}

func auditedBy(policy, rule string) gwExpect {
	return gwExpect{decision: Allow, effect: EffectAudit, policy: policy, rule: rule,
		reason: fmt.Sprintf("audited by rule %q of policy %q", rule, policy)}
}

func (e gwExpect) on(typ, name string) gwExpect {
	e.resource = ResourceRef{Type: typ, Name: name}
	return e
}

func (e gwExpect) warned(w ...string) gwExpect {
	e.warnings = w
	return e
}

var defaultAllow = gwExpect{decision: Allow, effect: EffectAllow}

func defaultDeny(policy string) gwExpect {
	return gwExpect{decision: Deny, effect: EffectDeny, reason: fmt.Sprintf("no rule matched and policy %q denies by default", policy)}
}

func implicitDeny(policy, typ, name string) gwExpect {
	return gwExpect{decision: Deny, effect: EffectDeny, policy: policy, code: CodeImplicitDeny,
		resource: ResourceRef{Type: typ, Name: name},
		reason:   fmt.Sprintf("no rule bound to resource %s/%s matched in policy %q", typ, name, policy)}
}

func warnReason(policy, rule string) string {
	return fmt.Sprintf("warned by rule %q of policy %q", rule, policy)
}

// catchAll keeps an ordered policy from deciding by default, so a case
// shows whether its rule matched: allow by "fallback" means it did not.
func catchAll() Policy {
	return Policy{ID: "zz-fallback", Version: 1, Priority: -100, Rules: []Rule{{ID: "fallback", Effect: "allow"}}}
}

func fallback() gwExpect { return allowedBy("zz-fallback", "fallback") }

// TestGatewayFilters: every filter, in an ordered policy (deny rule over a
// catch-all allow) and in a tiered one.
func TestGatewayFilters(t *testing.T) {
	t.Parallel()
	deny := func(opts ...ruleOpt) []Policy {
		return []Policy{ordered("p", gwRule("r", "deny", opts...)), catchAll()}
	}
	denyT := func(opts ...ruleOpt) []Policy {
		return []Policy{tiered("p", gwRule("r", "deny", opts...)), catchAll()}
	}
	hit := deniedBy("p", "r")
	miss := fallback()
	runGatewayCases(t, []gwCase{
		// subjects
		{name: "subjects/agent listed", policies: deny(withAgents("agent-1")), req: `{"tool_name":"Bash","agent_id":"agent-1"}`, want: hit},
		{name: "subjects/agent folded like freezes", policies: deny(withAgents("agent-k")), req: `{"tool_name":"Bash","agent_id":"AGENT-\u212a"}`, want: hit},
		{name: "subjects/agent not listed", policies: deny(withAgents("agent-1")), req: `{"tool_name":"Bash","agent_id":"agent-2"}`, want: miss},
		{name: "subjects/role listed", policies: deny(withRoles("ci")), req: `{"tool_name":"Bash","roles":["dev","ci"]}`, want: hit},
		{name: "subjects/roles compare exactly", policies: deny(withRoles("ci")), req: `{"tool_name":"Bash","roles":["CI"]}`, want: miss},
		{name: "subjects/agent or role", policies: deny(withAgents("x"), withRoles("ci")), req: `{"tool_name":"Bash","agent_id":"y","roles":["ci"]}`, want: hit},
		{name: "subjects/neither", policies: deny(withAgents("x"), withRoles("ci")), req: `{"tool_name":"Bash","agent_id":"y","roles":["dev"]}`, want: miss},
		{name: "subjects/non-string roles ignored", policies: deny(withRoles("ci")), req: `{"tool_name":"Bash","agent_id":"y","roles":[5,null,{"ci":1}]}`, want: miss},
		{name: "subjects/tiered", policies: denyT(withRoles("ci")), req: `{"tool_name":"Bash","roles":["ci"]}`, want: hit},
		// targets
		{name: "targets/tool", policies: deny(withTools("Bash", "Edit")), req: `{"tool_name":"Edit"}`, want: hit},
		{name: "targets/other tool", policies: deny(withTools("Bash")), req: `{"tool_name":"bash"}`, want: miss},
		{name: "targets/non-string tool", policies: deny(withTools("5")), req: `{"tool_name":5}`, want: miss},
		{name: "targets/server field", policies: deny(withServers("db")), req: `{"tool_name":"query","server":"db"}`, want: hit},
		{name: "targets/server derived", policies: deny(withServers("db")), req: `{"tool_name":"mcp__db__query"}`, want: hit},
		{name: "targets/server derived up to the next __", policies: deny(withServers("a")), req: `{"tool_name":"mcp__a__b__c"}`, want: hit},
		{name: "targets/no server: mcp__a", policies: deny(withServers("a")), req: `{"tool_name":"mcp__a"}`, want: miss},
		{name: "targets/no server: mcp__a__", policies: deny(withServers("a")), req: `{"tool_name":"mcp__a__"}`, want: miss},
		{name: "targets/no server: mcp____b", policies: deny(withServers("b", "__b")), req: `{"tool_name":"mcp____b"}`, want: miss},
		{name: "targets/server field wins", policies: deny(withServers("db")), req: `{"tool_name":"mcp__github__x","server":"db"}`, want: hit},
		{name: "targets/server field wins against", policies: deny(withServers("github")), req: `{"tool_name":"mcp__github__x","server":"db"}`, want: miss},
		{name: "targets/non-string server is none", policies: deny(withServers("github")), req: `{"tool_name":"mcp__github__x","server":5}`, want: miss},
		{name: "targets/server and tool", policies: deny(withServers("db"), withTools("mcp__db__query")), req: `{"tool_name":"mcp__db__query"}`, want: hit},
		{name: "targets/server but not tool", policies: deny(withServers("db"), withTools("mcp__db__drop")), req: `{"tool_name":"mcp__db__query"}`, want: miss},
		{name: "targets/ordered resource touched", policies: deny(boundTo("table", "orders", "invoices")),
			req: `{"tool_name":"q","resources":[{"type":"file","name":"x"},{"type":"table","name":"invoices"}]}`, want: hit},
		{name: "targets/ordered resource of another type", policies: deny(boundTo("table", "orders")),
			req: `{"tool_name":"q","resources":[{"type":"file","name":"orders"}]}`, want: miss},
		{name: "targets/ordered malformed resource not touched", policies: deny(boundTo("table", "orders")),
			req: `{"tool_name":"q","resources":[{"type":"table","name":["orders"]},{"name":"orders"},"table/orders"]}`, want: miss},
		{name: "targets/ordered server and resource both", policies: deny(withServers("db"), boundTo("table", "orders")),
			req: `{"tool_name":"mcp__fs__read","resources":[{"type":"table","name":"orders"}]}`, want: miss},
		// select
		{name: "select/action default call", policies: deny(withSelect(Select{Action: []string{"call"}})), req: `{"tool_name":"Bash"}`, want: hit},
		{name: "select/non-string action is call", policies: deny(withSelect(Select{Action: []string{"call"}})), req: `{"tool_name":"Bash","action":5}`, want: hit},
		{name: "select/action listed", policies: deny(withSelect(Select{Action: []string{"read", "write"}})), req: `{"tool_name":"Bash","action":"write"}`, want: hit},
		{name: "select/action not listed", policies: deny(withSelect(Select{Action: []string{"read"}})), req: `{"tool_name":"Bash"}`, want: miss},
		{name: "select/sideEffect listed", policies: deny(withSelect(Select{SideEffect: []string{"write", "delete"}})), req: `{"tool_name":"Bash","side_effect":"delete"}`, want: hit},
		{name: "select/sideEffect absent", policies: deny(withSelect(Select{SideEffect: []string{"write"}})), req: `{"tool_name":"Bash"}`, want: miss},
		{name: "select/tool exact", policies: deny(withSelect(Select{Tool: "Bash"})), req: `{"tool_name":"Bash"}`, want: hit},
		{name: "select/tool exact is not a search", policies: deny(withSelect(Select{Tool: "Bash"})), req: `{"tool_name":"Bash2"}`, want: miss},
		{name: "select/tool regex searches", policies: deny(withSelect(Select{Tool: "/github__(create|delete)_/"})), req: `{"tool_name":"mcp__github__delete_repo"}`, want: hit},
		{name: "select/tool regex misses", policies: deny(withSelect(Select{Tool: "/^github/"})), req: `{"tool_name":"mcp__github__delete_repo"}`, want: miss},
		{name: "select/resourceType ordered any touched", policies: deny(withSelect(Select{ResourceType: "table"})),
			req: `{"tool_name":"q","resources":[{"type":"file","name":"a"},{"type":"table","name":"b"}]}`, want: hit},
		{name: "select/resourceType ordered none touched", policies: deny(withSelect(Select{ResourceType: "table"})), req: `{"tool_name":"q","resource":{"type":"table"}}`, want: miss},
		{name: "select/resourceType never at tiered tool level", policies: denyT(withSelect(Select{ResourceType: "table"})),
			req: `{"tool_name":"q","resources":[{"type":"table","name":"b"}]}`, want: miss},
		{name: "select/context equal", policies: deny(withSelect(Select{Context: map[string]json.RawMessage{"region": raw("eu"), "n": raw(5)}})),
			req: `{"tool_name":"q","context":{"region":"eu","n":5.0}}`, want: hit},
		{name: "select/context is type-aware", policies: deny(withSelect(Select{Context: map[string]json.RawMessage{"n": raw(5)}})),
			req: `{"tool_name":"q","context":{"n":"5"}}`, want: miss},
		{name: "select/context key absent", policies: deny(withSelect(Select{Context: map[string]json.RawMessage{"region": raw("eu")}})),
			req: `{"tool_name":"q","context":{}}`, want: miss},
		{name: "select/context key is not a path", policies: deny(withSelect(Select{Context: map[string]json.RawMessage{"region": raw("eu")}})),
			req: `{"tool_name":"q","region":"eu"}`, want: miss},
		// when (schedules and limits have their own tests)
		{name: "when/environment", policies: deny(withWhen(When{Environments: []string{"prod"}})), req: `{"tool_name":"q","environment":"prod"}`, want: hit},
		{name: "when/environment absent", policies: deny(withWhen(When{Environments: []string{"prod"}})), req: `{"tool_name":"q"}`, want: miss},
		{name: "when/actorConfidence absent is unknown", policies: deny(withWhen(When{ActorConfidence: []string{"unknown"}})), req: `{"tool_name":"q"}`, want: hit},
		{name: "when/actorConfidence non-string is unknown", policies: deny(withWhen(When{ActorConfidence: []string{"unknown"}})), req: `{"tool_name":"q","actor_confidence":1}`, want: hit},
		{name: "when/actorConfidence listed", policies: deny(withWhen(When{ActorConfidence: []string{"low"}})), req: `{"tool_name":"q","actor_confidence":"low"}`, want: hit},
		{name: "when/actorConfidence not listed", policies: deny(withWhen(When{ActorConfidence: []string{"low"}})), req: `{"tool_name":"q","actor_confidence":"verified"}`, want: miss},
		{name: "when/sensitivity call tags", policies: deny(withWhen(When{Sensitivity: []string{"pii"}})), req: `{"tool_name":"q","sensitivity":["public","pii"]}`, want: hit},
		{name: "when/sensitivity touched resource's tags", policies: deny(withWhen(When{Sensitivity: []string{"pii"}})),
			req: `{"tool_name":"q","resources":[{"type":"t","name":"a","sensitivity":["pii"]}]}`, want: hit},
		{name: "when/sensitivity tiered tool level reads every resource's tags", policies: denyT(withWhen(When{Sensitivity: []string{"pii"}})),
			req: `{"tool_name":"q","resources":[{"type":"t","name":"a"},{"type":"t","name":"b","sensitivity":["pii"]}]}`, want: hit},
		{name: "when/sensitivity none", policies: deny(withWhen(When{Sensitivity: []string{"pii"}})),
			req: `{"tool_name":"q","sensitivity":"pii","resources":[{"type":"t","name":"a","sensitivity":["public"]}]}`, want: miss},
		// conditions
		{name: "conditions/leaf", policies: deny(withConds(cond("input.command", "contains", "rm"))), req: `{"tool_name":"q","input":{"command":"rm -rf"}}`, want: hit},
		{name: "conditions/new request fields are paths", policies: deny(withConds(cond("context.region", "eq", "eu"), cond("roles", "contains", "ci"))),
			req: `{"tool_name":"q","context":{"region":"eu"},"roles":["ci"]}`, want: hit},
		{name: "conditions/resource at tool level is the request's own", policies: denyT(withConds(cond("resource.name", "eq", "orders"))),
			req: `{"tool_name":"q","resource":{"name":"orders"},"resources":[{"type":"t","name":"x"}]}`, want: hit},
		// filters combine
		{name: "all filters hold", policies: deny(withRoles("ci"), withTools("mcp__db__query"), withServers("db"),
			withSelect(Select{Action: []string{"call"}}), withWhen(When{Environments: []string{"prod"}}), withConds(cond("kwargs.n", "gt", 1))),
			req: `{"tool_name":"mcp__db__query","roles":["ci"],"environment":"prod","kwargs":{"n":2}}`, want: hit},
		{name: "one filter fails", policies: deny(withRoles("ci"), withTools("mcp__db__query"), withServers("db"),
			withSelect(Select{Action: []string{"call"}}), withWhen(When{Environments: []string{"prod"}}), withConds(cond("kwargs.n", "gt", 1))),
			req: `{"tool_name":"mcp__db__query","roles":["ci"],"environment":"dev","kwargs":{"n":2}}`, want: miss},
	})
}

// TestGatewayRolesUnresolved: missing identity never grants access, and
// never escapes a deny scoped by it; roles [] is resolved (no roles).
func TestGatewayRolesUnresolved(t *testing.T) {
	t.Parallel()
	var cases []gwCase
	for _, mode := range []string{"ordered", "tiered"} {
		pol := func(effect string, opts ...ruleOpt) []Policy {
			p := ordered("p", gwRule("r", effect, opts...))
			if mode == "tiered" {
				p = tiered("p", gwRule("r", effect, opts...))
				p.DefaultEffect = "allow"
			}
			return []Policy{p, {ID: "zz-fallback", Version: 1, Priority: -100, Rules: []Rule{{ID: "fallback", Effect: "audit"}}}}
		}
		fb := auditedBy("zz-fallback", "fallback")
		for _, rc := range []struct {
			name, roles string
			unresolved  bool
		}{
			{"absent", ``, true},
			{"null", `,"roles":null`, true},
			{"a string", `,"roles":"ci"`, true},
			{"an object", `,"roles":{"ci":true}`, true},
			{"empty", `,"roles":[]`, false},
			{"other roles", `,"roles":["dev"]`, false},
		} {
			req := `{"tool_name":"Bash","agent_id":"a"` + rc.roles + `}`
			wantDeny := fb
			if rc.unresolved {
				wantDeny = deniedBy("p", "r")
			}
			cases = append(cases,
				gwCase{name: mode + "/deny/roles " + rc.name, policies: pol("deny", withRoles("ci")), req: req, want: wantDeny},
				gwCase{name: mode + "/allow/roles " + rc.name, policies: pol("allow", withRoles("ci")), req: req, want: fb},
				gwCase{name: mode + "/warn/roles " + rc.name, policies: pol("warn", withRoles("ci")), req: req, want: fb},
				gwCase{name: mode + "/audit/roles " + rc.name, policies: pol("audit", withRoles("ci")), req: req, want: fb},
				// Listing both: either missing identity applies the deny.
				gwCase{name: mode + "/deny/agents and roles, roles " + rc.name, policies: pol("deny", withAgents("x"), withRoles("ci")), req: req, want: wantDeny},
			)
		}
		for _, ac := range []struct{ name, agent string }{{"absent", ``}, {"a number", `,"agent_id":5`}, {"null", `,"agent_id":null`}} {
			req := `{"tool_name":"Bash","roles":["dev"]` + ac.agent + `}`
			cases = append(cases,
				gwCase{name: mode + "/deny/agent " + ac.name, policies: pol("deny", withAgents("x")), req: req, want: deniedBy("p", "r")},
				gwCase{name: mode + "/allow/agent " + ac.name, policies: pol("allow", withAgents("x")), req: req, want: fb},
				gwCase{name: mode + "/deny/agents and roles, agent " + ac.name, policies: pol("deny", withAgents("x"), withRoles("ci")), req: req, want: deniedBy("p", "r")},
			)
		}
		cases = append(cases, gwCase{name: mode + "/deny/agent present, not listed", policies: pol("deny", withAgents("x")),
			req: `{"tool_name":"Bash","agent_id":""}`, want: fb})
	}
	runGatewayCases(t, cases)
}

// TestGatewayTiers: every pair of effects in one tier, tiers, spec order.
func TestGatewayTiers(t *testing.T) {
	t.Parallel()
	effects := []string{"allow", "audit", "warn", "deny"} // weakest first
	expectOf := func(policy, rule, effect string) gwExpect {
		switch effect {
		case "deny":
			return deniedBy(policy, rule)
		case "warn":
			return warnedBy(policy, rule)
		case "audit":
			return auditedBy(policy, rule)
		}
		return allowedBy(policy, rule)
	}
	var cases []gwCase
	for _, e := range effects {
		cases = append(cases, gwCase{name: "alone/" + e, policies: []Policy{tiered("p", gwRule("a", e))}, req: `{"tool_name":"x"}`, want: expectOf("p", "a", e)})
	}
	for i, weak := range effects {
		for _, strong := range effects[i+1:] {
			for _, order := range []string{"weak first", "strong first"} {
				rules := []Rule{gwRule("weak", weak), gwRule("strong", strong)}
				if order == "strong first" {
					rules[0], rules[1] = rules[1], rules[0]
				}
				want := expectOf("p", "strong", strong)
				// A warn verdict lists its own reason; the weaker warn
				// rule in the same tier decides nothing and lists nothing.
				cases = append(cases, gwCase{name: fmt.Sprintf("same tier/%s vs %s/%s", weak, strong, order),
					policies: []Policy{tiered("p", rules...)}, req: `{"tool_name":"x"}`, want: want})
				// In a higher tier, the weaker effect decides.
				high := []Rule{gwRule("weak", weak, withPriority(10)), gwRule("strong", strong, withPriority(-3))}
				if order == "strong first" {
					high[0], high[1] = high[1], high[0]
				}
				cases = append(cases, gwCase{name: fmt.Sprintf("higher tier/%s over %s/%s", weak, strong, order),
					policies: []Policy{tiered("p", high...)}, req: `{"tool_name":"x"}`, want: expectOf("p", "weak", weak)})
			}
		}
	}
	for _, e := range effects {
		cases = append(cases, gwCase{name: "first in spec order/" + e,
			policies: []Policy{tiered("p", gwRule("lower", e, withPriority(-1)), gwRule("first", e, withPriority(2)), gwRule("second", e, withPriority(2)))},
			req:      `{"tool_name":"x"}`, want: expectOf("p", "first", e)})
	}
	cases = append(cases,
		gwCase{name: "extreme tiers", policies: []Policy{tiered("p", gwRule("d", "deny", withPriority(math.MinInt32)), gwRule("a", "audit", withPriority(math.MaxInt32)))},
			req: `{"tool_name":"x"}`, want: auditedBy("p", "a")},
		gwCase{name: "negative tiers", policies: []Policy{tiered("p", gwRule("d", "deny", withPriority(-5)), gwRule("a", "allow", withPriority(-4)))},
			req: `{"tool_name":"x"}`, want: allowedBy("p", "a")},
		gwCase{name: "non-matching higher tier does not count", policies: []Policy{tiered("p",
			gwRule("a", "allow", withPriority(100), withTools("Read")), gwRule("d", "deny"))},
			req: `{"tool_name":"x"}`, want: deniedBy("p", "d")},
		gwCase{name: "description is the reason", policies: []Policy{tiered("p", gwRule("w", "warn", withDescription("careful: prod")))},
			req: `{"tool_name":"x"}`, want: gwExpect{decision: Allow, effect: EffectWarn, policy: "p", rule: "w", reason: "careful: prod", warnings: []string{"careful: prod"}}},
		gwCase{name: "audit description", policies: []Policy{tiered("p", gwRule("au", "audit", withDescription("logged")))},
			req: `{"tool_name":"x"}`, want: gwExpect{decision: Allow, effect: EffectAudit, policy: "p", rule: "au", reason: "logged"}},
		gwCase{name: "allow description", policies: []Policy{tiered("p", gwRule("al", "allow", withDescription("fine")))},
			req: `{"tool_name":"x"}`, want: gwExpect{decision: Allow, effect: EffectAllow, policy: "p", rule: "al", reason: "fine"}},
		gwCase{name: "literal deny reason", policies: []Policy{tiered("guard", gwRule("no-bash", "deny"))},
			req: `{"tool_name":"x"}`, want: gwExpect{decision: Deny, effect: EffectDeny, policy: "guard", rule: "no-bash", reason: `denied by rule "no-bash" of policy "guard"`}},
	)
	runGatewayCases(t, cases)
}

// TestGatewayOrderedEffects: in an ordered policy warn and audit are
// remembered like allow (the last decides), a deny returns at once.
func TestGatewayOrderedEffects(t *testing.T) {
	t.Parallel()
	runGatewayCases(t, []gwCase{
		{name: "warn then allow", policies: []Policy{ordered("p", gwRule("w", "warn"), gwRule("a", "allow"))},
			req: `{"tool_name":"x"}`, want: allowedBy("p", "a").warned(warnReason("p", "w"))},
		{name: "allow then warn", policies: []Policy{ordered("p", gwRule("a", "allow"), gwRule("w", "warn"))},
			req: `{"tool_name":"x"}`, want: warnedBy("p", "w")},
		{name: "audit last", policies: []Policy{ordered("p", gwRule("w", "warn"), gwRule("au", "audit"))},
			req: `{"tool_name":"x"}`, want: auditedBy("p", "au").warned(warnReason("p", "w"))},
		{name: "two warns", policies: []Policy{ordered("p", gwRule("w1", "warn"), gwRule("w2", "warn"))},
			req: `{"tool_name":"x"}`, want: warnedBy("p", "w2").warned(warnReason("p", "w1"), warnReason("p", "w2"))},
		{name: "warn then deny", policies: []Policy{ordered("p", gwRule("w", "warn"), gwRule("d", "deny"), gwRule("w2", "warn"))},
			req: `{"tool_name":"x"}`, want: deniedBy("p", "d").warned(warnReason("p", "w"))},
		{name: "deny first stops the scan", policies: []Policy{ordered("p", gwRule("d", "deny"), gwRule("w", "warn"))},
			req: `{"tool_name":"x"}`, want: deniedBy("p", "d")},
		{name: "warn in a higher policy, allow in a lower one", policies: []Policy{
			{ID: "high", Version: 1, Priority: 5, Rules: []Rule{gwRule("w", "warn")}}, ordered("low", gwRule("a", "allow"))},
			req: `{"tool_name":"x"}`, want: allowedBy("low", "a").warned(warnReason("high", "w"))},
		{name: "warn in a higher policy, deny in a lower one", policies: []Policy{
			{ID: "high", Version: 1, Priority: 5, Rules: []Rule{gwRule("w", "warn")}}, ordered("low", gwRule("d", "deny"))},
			req: `{"tool_name":"x"}`, want: deniedBy("low", "d").warned(warnReason("high", "w"))},
	})
}

// TestGatewayComposition: a tiered policy takes part in the namespace scan
// as one rule would.
func TestGatewayComposition(t *testing.T) {
	t.Parallel()
	high := func(p Policy) Policy { p.Priority = 10; return p }
	runGatewayCases(t, []gwCase{
		{name: "tiered deny returns at once", policies: []Policy{high(tiered("t", gwRule("d", "deny"))), ordered("o", gwRule("a", "allow"))},
			req: `{"tool_name":"x"}`, want: deniedBy("t", "d")},
		{name: "tiered allow is remembered, a later allow decides", policies: []Policy{high(tiered("t", gwRule("a", "allow"))), ordered("o", gwRule("a2", "allow"))},
			req: `{"tool_name":"x"}`, want: allowedBy("o", "a2")},
		{name: "tiered allow is remembered, a later deny decides", policies: []Policy{high(tiered("t", gwRule("a", "allow"))), ordered("o", gwRule("d", "deny"))},
			req: `{"tool_name":"x"}`, want: deniedBy("o", "d")},
		{name: "tiered allow decides when nothing follows", policies: []Policy{high(tiered("t", gwRule("a", "allow"))), ordered("o", gwRule("d", "deny", withTools("Bash")))},
			req: `{"tool_name":"x"}`, want: allowedBy("t", "a")},
		{name: "tiered no match contributes nothing", policies: []Policy{high(tiered("t", gwRule("d", "deny", withTools("Bash")))), ordered("o", gwRule("a", "allow"))},
			req: `{"tool_name":"x"}`, want: allowedBy("o", "a")},
		{name: "tiered warn, later ordered allow", policies: []Policy{high(tiered("t", gwRule("w", "warn"))), ordered("o", gwRule("a", "allow"))},
			req: `{"tool_name":"x"}`, want: allowedBy("o", "a").warned(warnReason("t", "w"))},
		{name: "two tiered policies, the later's warn decides", policies: []Policy{high(tiered("t", gwRule("w", "warn"))), tiered("u", gwRule("w", "warn"))},
			req: `{"tool_name":"x"}`, want: warnedBy("u", "w").warned(warnReason("t", "w"), warnReason("u", "w"))},
		{name: "ordered deny before a tiered policy", policies: []Policy{high(ordered("o", gwRule("d", "deny"))), tiered("t", gwRule("w", "warn"))},
			req: `{"tool_name":"x"}`, want: deniedBy("o", "d")},
		{name: "tiered policy with a version", policies: []Policy{{ID: "t", Version: 7, Evaluation: EvaluationTiered, Rules: []Rule{gwRule("d", "deny")}}},
			req: `{"tool_name":"x"}`, want: gwExpect{decision: Deny, effect: EffectDeny, policy: "t", version: 7, rule: "d", reason: `denied by rule "d" of policy "t"`}},
	})
}

// TestGatewayMultiTarget: per-resource evaluation (issue 9 section 3.4).
func TestGatewayMultiTarget(t *testing.T) {
	t.Parallel()
	two := `{"tool_name":"mcp__db__query","resources":[{"type":"table","name":"orders"},{"type":"table","name":"users","sensitivity":["pii"]}]}`
	runGatewayCases(t, []gwCase{
		{name: "no opinion: tool level decides", policies: []Policy{tiered("p", gwRule("a", "allow"), gwRule("b", "deny", boundTo("file", "x")))},
			req: two, want: allowedBy("p", "a")},
		{name: "no opinion everywhere: no match, default deny", policies: []Policy{tiered("p", gwRule("b", "deny", boundTo("file", "x")))},
			req: two, want: defaultDeny("p")},
		{name: "implicit deny", policies: []Policy{tiered("p", gwRule("a", "allow"), gwRule("r", "allow", boundTo("table", "orders"), withRoles("analyst")))},
			req: two, want: implicitDeny("p", "table", "orders")},
		{name: "resource bound only by deny rules denies every call touching it", policies: []Policy{tiered("p", gwRule("a", "allow"),
			gwRule("no-drop", "deny", boundTo("table", "users"), withConds(cond("input.sql", "contains", "DROP"))))},
			req: two, want: implicitDeny("p", "table", "users")},
		{name: "bound rule matches", policies: []Policy{tiered("p", gwRule("a", "allow"), gwRule("r", "allow", boundTo("table", "orders")))},
			req: two, want: allowedBy("p", "a")},
		{name: "any deny wins over tool level allow", policies: []Policy{tiered("p", gwRule("a", "allow", withPriority(100)), gwRule("d", "deny", boundTo("table", "users")))},
			req: two, want: deniedBy("p", "d").on("table", "users")},
		{name: "tool level deny over resource allow", policies: []Policy{tiered("p", gwRule("d", "deny"), gwRule("r", "allow", boundTo("table", "orders", "users")))},
			req: two, want: deniedBy("p", "d")},
		{name: "resource deny over another resource's allow", policies: []Policy{tiered("p",
			gwRule("ok", "allow", boundTo("table", "orders")), gwRule("d", "deny", boundTo("table", "users")))},
			req: two, want: deniedBy("p", "d").on("table", "users")},
		{name: "two resources deny: the first in request order", policies: []Policy{tiered("p",
			gwRule("d-users", "deny", boundTo("table", "users")), gwRule("d-orders", "deny", boundTo("table", "orders")))},
			req: two, want: deniedBy("p", "d-orders").on("table", "orders")},
		{name: "tie between tool level and a resource: tool level", policies: []Policy{tiered("p",
			gwRule("tw", "warn"), gwRule("rw", "warn", boundTo("table", "orders")))},
			req: two, want: warnedBy("p", "tw").warned(warnReason("p", "tw"), warnReason("p", "rw"))},
		{name: "tie between tool level deny and resource implicit deny: tool level", policies: []Policy{tiered("p",
			gwRule("d", "deny"), gwRule("r", "allow", boundTo("table", "orders"), withRoles("x")))},
			req: two, want: deniedBy("p", "d")},
		{name: "implicit deny before a rule deny in request order", policies: []Policy{tiered("p", gwRule("a", "allow"),
			gwRule("r", "allow", boundTo("table", "orders"), withRoles("x")), gwRule("d", "deny", boundTo("table", "users")))},
			req: two, want: implicitDeny("p", "table", "orders")},
		{name: "strongest: resource warn over tool allow", policies: []Policy{tiered("p", gwRule("a", "allow", withPriority(9)), gwRule("w", "warn", boundTo("table", "users")))},
			req: two, want: warnedBy("p", "w").on("table", "users")},
		{name: "strongest: resource audit over tool allow", policies: []Policy{tiered("p", gwRule("a", "allow"), gwRule("au", "audit", boundTo("table", "users")))},
			req: two, want: auditedBy("p", "au").on("table", "users")},
		{name: "strongest: tool warn over resource audit", policies: []Policy{tiered("p", gwRule("w", "warn"), gwRule("au", "audit", boundTo("table", "users")))},
			req: two, want: warnedBy("p", "w")},
		{name: "resource allow when tool level has no match", policies: []Policy{tiered("p", gwRule("t", "deny", withTools("Bash")), gwRule("r", "allow", boundTo("table", "orders", "users")))},
			req: two, want: allowedBy("p", "r").on("table", "orders")},
		{name: "tiers are per evaluation", policies: []Policy{tiered("p",
			gwRule("high", "allow", withPriority(100)), gwRule("low", "deny", withPriority(-100), boundTo("table", "orders")))},
			req: two, want: deniedBy("p", "low").on("table", "orders")},
		{name: "tiers within a resource", policies: []Policy{tiered("p",
			gwRule("d", "deny", boundTo("table", "orders")), gwRule("a", "allow", withPriority(1), boundTo("table", "orders")))},
			req: two, want: allowedBy("p", "a").on("table", "orders")},
		{name: "a deny does not stop the policy's other evaluations' warnings", policies: []Policy{tiered("p",
			gwRule("d", "deny"), gwRule("w", "warn", boundTo("table", "users")))},
			req: two, want: deniedBy("p", "d").warned(warnReason("p", "w"))},
		{name: "warnings: tool level first, then resources in request order", policies: []Policy{tiered("p",
			gwRule("w-users", "warn", boundTo("table", "users")), gwRule("w-orders", "warn", boundTo("table", "orders")), gwRule("w-tool", "warn"))},
			req:  two,
			want: warnedBy("p", "w-tool").warned(warnReason("p", "w-tool"), warnReason("p", "w-orders"), warnReason("p", "w-users"))},
		{name: "rules bound to resources are not tool level candidates", policies: []Policy{tiered("p", gwRule("r", "deny", boundTo("table", "orders")))},
			req: `{"tool_name":"q"}`, want: defaultDeny("p")},
		{name: "bound needs the rule's other targets", policies: []Policy{tiered("p", gwRule("a", "allow"),
			gwRule("r", "deny", withServers("github"), boundTo("table", "orders")))},
			req: two, want: allowedBy("p", "a")},
		{name: "bound with its server", policies: []Policy{tiered("p", gwRule("a", "allow"),
			gwRule("r", "deny", withServers("db"), boundTo("table", "orders")))},
			req: two, want: deniedBy("p", "r").on("table", "orders")},
		{name: "malformed items are not evaluated", policies: []Policy{tiered("p", gwRule("a", "allow"), gwRule("r", "deny", boundTo("table", "orders")))},
			req:  `{"tool_name":"q","resources":[{"type":"table"},{"type":"table","name":5},{"name":"orders"},"table/orders",null,[{"type":"table","name":"orders"}]]}`,
			want: allowedBy("p", "a")},
		{name: "resources not a list", policies: []Policy{tiered("p", gwRule("a", "allow"), gwRule("r", "deny", boundTo("table", "orders")))},
			req: `{"tool_name":"q","resources":{"type":"table","name":"orders"}}`, want: allowedBy("p", "a")},
		{name: "duplicate resources are each evaluated", policies: []Policy{tiered("p", gwRule("w", "warn", boundTo("table", "orders")))},
			req:  `{"tool_name":"q","resources":[{"type":"table","name":"orders"},{"type":"table","name":"orders"}]}`,
			want: warnedBy("p", "w").on("table", "orders").warned(warnReason("p", "w"), warnReason("p", "w"))},
		{name: "selects resource type per resource", policies: []Policy{tiered("p", gwRule("a", "allow"),
			gwRule("r", "deny", boundTo("table", "orders"), boundTo("file", "orders"), withSelect(Select{ResourceType: "file"})))},
			req:  `{"tool_name":"q","resources":[{"type":"table","name":"orders"},{"type":"file","name":"orders"}]}`,
			want: implicitDeny("p", "table", "orders")},
		{name: "sensitivity per resource: call tags plus that resource's", policies: []Policy{tiered("p",
			gwRule("pii", "deny", boundTo("table", "orders", "users"), withWhen(When{Sensitivity: []string{"pii"}})),
			gwRule("ok", "allow", boundTo("table", "orders", "users"), withPriority(-1)))},
			req: two, want: deniedBy("p", "pii").on("table", "users")},
		{name: "sensitivity per resource: call tags count for every resource", policies: []Policy{tiered("p",
			gwRule("pii", "deny", boundTo("table", "orders", "users"), withWhen(When{Sensitivity: []string{"pii"}})),
			gwRule("ok", "allow", boundTo("table", "orders", "users"), withPriority(-1)))},
			req:  `{"tool_name":"q","sensitivity":["pii"],"resources":[{"type":"table","name":"orders"}]}`,
			want: deniedBy("p", "pii").on("table", "orders")},
		{name: "ordered policy ignores per-resource evaluation", policies: []Policy{ordered("o", gwRule("r", "allow", boundTo("table", "orders"), withRoles("x"))), catchAll()},
			req: two, want: fallback()},
	})
}

// TestGatewayResourceConditions: conditions rooted at resource read the
// resource under evaluation.
func TestGatewayResourceConditions(t *testing.T) {
	t.Parallel()
	two := `{"tool_name":"q","resource":{"name":"own","type":"table"},"resources":[{"type":"table","name":"orders","owner":"eu"},{"type":"table","name":"users","sensitivity":["pii"]}]}`
	bound := func(conds ...Condition) []Policy {
		return []Policy{tiered("p", gwRule("a", "allow"),
			gwRule("r", "deny", boundTo("table", "orders", "users"), withConds(conds...)),
			gwRule("ok", "allow", boundTo("table", "orders", "users"), withPriority(-1)))}
	}
	runGatewayCases(t, []gwCase{
		{name: "resource.name", policies: bound(cond("resource.name", "eq", "users")), req: two, want: deniedBy("p", "r").on("table", "users")},
		{name: "resource.name of the first", policies: bound(cond("resource.name", "eq", "orders")), req: two, want: deniedBy("p", "r").on("table", "orders")},
		{name: "resource.name is not the request's own", policies: bound(cond("resource.name", "eq", "own")), req: two, want: allowedBy("p", "a")},
		{name: "resource.sensitivity", policies: bound(cond("resource.sensitivity", "contains", "pii")), req: two, want: deniedBy("p", "r").on("table", "users")},
		{name: "resource's other fields", policies: bound(cond("resource.owner", "eq", "eu")), req: two, want: deniedBy("p", "r").on("table", "orders")},
		{name: "resource itself", policies: bound(cond("resource", "contains", `"name":"users"`)), req: two, want: deniedBy("p", "r").on("table", "users")},
		{name: "inside a group", policies: bound(Condition{Any: []Condition{cond("kwargs.x", "eq", 1), {All: []Condition{cond("resource.type", "eq", "table"), cond("resource.name", "starts_with", "u")}}}}),
			req: two, want: deniedBy("p", "r").on("table", "users")},
		{name: "ordered reads the request's own", policies: []Policy{ordered("o", gwRule("r", "deny", withConds(cond("resource.name", "eq", "own")))), catchAll()},
			req: two, want: deniedBy("o", "r")},
	})
}

// TestGatewayGroups: any and all.
func TestGatewayGroups(t *testing.T) {
	t.Parallel()
	anyOf := func(c ...Condition) Condition { return Condition{Any: c} }
	allOf := func(c ...Condition) Condition { return Condition{All: c} }
	// issue 9's example: amount <= 1000, or the CFO bot paying in EUR.
	pay := anyOf(cond("kwargs.amount", "lte", 1000), allOf(cond("agent_id", "eq", "cfo-bot"), cond("kwargs.currency", "eq", "EUR")))
	pol := func(c ...Condition) []Policy {
		return []Policy{ordered("p", gwRule("r", "deny", withConds(c...))), catchAll()}
	}
	hit, miss := deniedBy("p", "r"), fallback()
	runGatewayCases(t, []gwCase{
		{name: "any: first leaf", policies: pol(pay), req: `{"tool_name":"pay","kwargs":{"amount":10}}`, want: hit},
		{name: "any: all group", policies: pol(pay), req: `{"tool_name":"pay","agent_id":"cfo-bot","kwargs":{"amount":5000,"currency":"EUR"}}`, want: hit},
		{name: "any: all group half holds", policies: pol(pay), req: `{"tool_name":"pay","agent_id":"cfo-bot","kwargs":{"amount":5000,"currency":"USD"}}`, want: miss},
		{name: "any: none", policies: pol(pay), req: `{"tool_name":"pay","agent_id":"x","kwargs":{"amount":5000,"currency":"EUR"}}`, want: miss},
		{name: "any with a leaf beside it", policies: pol(cond("tool_name", "eq", "pay"), pay), req: `{"tool_name":"Bash","kwargs":{"amount":10}}`, want: miss},
		{name: "any with a leaf beside it holds", policies: pol(cond("tool_name", "eq", "pay"), pay), req: `{"tool_name":"pay","kwargs":{"amount":10}}`, want: hit},
		{name: "two any groups both needed", policies: pol(anyOf(cond("a", "eq", 1), cond("b", "eq", 1)), anyOf(cond("c", "eq", 1))),
			req: `{"tool_name":"x","b":1,"c":2}`, want: miss},
		{name: "any with absent fields and negative operators", policies: pol(anyOf(cond("missing", "eq", 1), cond("missing", "neq", 1))),
			req: `{"tool_name":"x"}`, want: hit},
		{name: "tiered", policies: []Policy{tiered("p", gwRule("r", "deny", withConds(pay))), catchAll()}, req: `{"tool_name":"pay","kwargs":{"amount":"999"}}`, want: hit},
	})
}

// TestGatewayServerDerivation: mcp__<server>__<tool>.
func TestGatewayServerDerivation(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		tool, server string // "" server: none
	}{
		{"mcp__github__create_issue", "github"},
		{"mcp__a__b__c", "a"},
		{"mcp__a__b", "a"},
		{"mcp__a", ""},
		{"mcp__a__", ""},
		{"mcp____b", ""},
		{"mcp__", ""},
		{"Mcp__a__b", ""},
		{"xmcp__a__b", ""},
		{"mcp_a__b", ""},
	} {
		t.Run(tc.tool, func(t *testing.T) {
			t.Parallel()
			servers := []string{"github", "a", "b", "", "__b"}
			c := mustCompile(t, Bundle{Policies: []Policy{
				ordered("p", gwRule("r", "deny", withServers(servers[:3]...))), catchAll()}})
			res := c.Evaluate(Request{"tool_name": tc.tool}, EvalOptions{Now: fixedClock(t0)})
			if got := res.MatchedRuleID == "r"; got != (tc.server != "") {
				t.Errorf("server rule matched=%v, want server %q", got, tc.server)
			}
			if tc.server != "" {
				only := mustCompile(t, Bundle{Policies: []Policy{
					ordered("p", gwRule("r", "deny", withServers(tc.server+"x"))), catchAll()}})
				if res := only.Evaluate(Request{"tool_name": tc.tool}, EvalOptions{Now: fixedClock(t0)}); res.MatchedRuleID == "r" {
					t.Errorf("server %q matched %q", tc.server+"x", tc.tool)
				}
			}
			call := refRead(map[string]any{"tool_name": tc.tool})
			if call.serverOK != (tc.server != "") || call.server != tc.server {
				t.Errorf("reference derives %q (%v)", call.server, call.serverOK)
			}
		})
	}
}

func at(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// TestGatewaySchedule: windows, midnight, DST, zones west of UTC.
func TestGatewaySchedule(t *testing.T) {
	t.Parallel()
	pol := func(w ...Window) []Policy {
		return []Policy{ordered("p", gwRule("r", "deny", withWhen(When{Schedule: w}))), catchAll()}
	}
	hit, miss := deniedBy("p", "r"), fallback()
	night := Window{Days: []string{"fri"}, From: "22:00", To: "06:00"}
	berlin := func(from, to string) Window { return Window{From: from, To: to, TimeZone: "Europe/Berlin"} }
	la := Window{Days: []string{"mon"}, From: "09:00", To: "17:00", TimeZone: "America/Los_Angeles"}
	req := `{"tool_name":"x"}`
	var cases []gwCase
	for _, c := range []struct {
		name string
		w    []Window
		now  string
		hit  bool
	}{
		{"office hours inside", []Window{{Days: []string{"tue"}, From: "08:00", To: "18:00"}}, "2026-11-03T12:00:00Z", true},
		{"from is inclusive", []Window{{Days: []string{"tue"}, From: "08:00", To: "18:00"}}, "2026-11-03T08:00:00Z", true},
		{"before from", []Window{{Days: []string{"tue"}, From: "08:00", To: "18:00"}}, "2026-11-03T07:59:59Z", false},
		{"to is exclusive", []Window{{Days: []string{"tue"}, From: "08:00", To: "18:00"}}, "2026-11-03T18:00:00Z", false},
		{"last second before to", []Window{{Days: []string{"tue"}, From: "08:00", To: "18:00"}}, "2026-11-03T17:59:59Z", true},
		{"other day", []Window{{Days: []string{"mon", "wed"}, From: "08:00", To: "18:00"}}, "2026-11-03T12:00:00Z", false},
		{"no days is every day", []Window{{From: "08:00", To: "18:00"}}, "2026-11-08T12:00:00Z", true},
		{"any window", []Window{{Days: []string{"mon"}, From: "08:00", To: "18:00"}, {Days: []string{"tue"}, From: "11:00", To: "13:00"}}, "2026-11-03T12:00:00Z", true},
		// A window crossing midnight belongs to the day it starts.
		{"midnight: the start day, at from", []Window{night}, "2026-11-06T22:00:00Z", true},
		{"midnight: the start day, before from", []Window{night}, "2026-11-06T21:59:59Z", false},
		{"midnight: the next day, after midnight", []Window{night}, "2026-11-07T00:00:00Z", true},
		{"midnight: the next day, before to", []Window{night}, "2026-11-07T05:59:59Z", true},
		{"midnight: the next day, at to", []Window{night}, "2026-11-07T06:00:00Z", false},
		{"midnight: the next day's own evening", []Window{night}, "2026-11-07T22:30:00Z", false},
		{"midnight: the start day's early morning", []Window{night}, "2026-11-06T05:00:00Z", false},
		{"midnight: every day", []Window{{From: "23:00", To: "01:00"}}, "2026-11-03T00:30:00Z", true},
		// Europe/Berlin: 2026-03-29 jumps from 02:00 CET to 03:00 CEST.
		{"berlin spring: 01:59:59 CET", []Window{berlin("01:00", "02:00")}, "2026-03-29T00:59:59Z", true},
		{"berlin spring: 03:00 CEST is past 02:00-03:00", []Window{berlin("02:00", "03:00")}, "2026-03-29T01:00:00Z", false},
		{"berlin spring: 03:00 CEST in 03:00-04:00", []Window{berlin("03:00", "04:00")}, "2026-03-29T01:00:00Z", true},
		{"berlin spring: 08:00 CEST is 06:00 UTC", []Window{berlin("08:00", "18:00")}, "2026-03-29T06:00:00Z", true},
		{"berlin spring: 07:59 CEST", []Window{berlin("08:00", "18:00")}, "2026-03-29T05:59:00Z", false},
		// 2026-10-25 repeats 02:00-03:00 (CEST, then CET).
		{"berlin autumn: 02:30 CEST", []Window{berlin("02:00", "03:00")}, "2026-10-25T00:30:00Z", true},
		{"berlin autumn: 02:30 CET", []Window{berlin("02:00", "03:00")}, "2026-10-25T01:30:00Z", true},
		{"berlin autumn: 03:00 CET", []Window{berlin("02:00", "03:00")}, "2026-10-25T02:00:00Z", false},
		{"berlin autumn: 08:00 CET is 07:00 UTC", []Window{berlin("08:00", "18:00")}, "2026-10-25T07:00:00Z", true},
		{"berlin autumn: 07:00 UTC was 08:00 CEST the day before", []Window{berlin("09:00", "18:00")}, "2026-10-24T07:00:00Z", true},
		{"berlin: the day is Berlin's", []Window{{Days: []string{"tue"}, From: "00:00", To: "01:00", TimeZone: "Europe/Berlin"}}, "2026-11-02T23:30:00Z", true},
		// America/Los_Angeles (UTC-8 in November): Monday there is Tuesday in UTC.
		{"la: 08:59 PST", []Window{la}, "2026-11-02T16:59:00Z", false},
		{"la: 09:00 PST", []Window{la}, "2026-11-02T17:00:00Z", true},
		{"la: Monday 16:30 PST is Tuesday UTC", []Window{la}, "2026-11-03T00:30:00Z", true},
		{"la: 17:00 PST", []Window{la}, "2026-11-03T01:00:00Z", false},
		{"la: UTC Monday morning is Sunday there", []Window{{Days: []string{"mon"}, From: "00:00", To: "12:00", TimeZone: "America/Los_Angeles"}}, "2026-11-02T07:00:00Z", false},
		{"la: spring forward, 03:00 PDT", []Window{{From: "03:00", To: "04:00", TimeZone: "America/Los_Angeles"}}, "2026-03-08T10:00:00Z", true},
		{"utc named", []Window{{From: "11:00", To: "12:01", TimeZone: "UTC"}}, "2026-11-03T12:00:00Z", true},
		// The week wraps: Sunday's window runs into Monday, Saturday's into Sunday.
		{"week wrap: sunday into monday", []Window{{Days: []string{"sun"}, From: "22:00", To: "02:00"}}, "2026-11-02T01:00:00Z", true},
		{"week wrap: saturday into sunday", []Window{{Days: []string{"sat"}, From: "22:00", To: "02:00"}}, "2026-11-08T01:00:00Z", true},
		{"week wrap: not monday's", []Window{{Days: []string{"mon"}, From: "22:00", To: "02:00"}}, "2026-11-02T01:00:00Z", false},
		// Crossing midnight into the spring DST night in Berlin.
		{"berlin spring night: 01:59:59 CET", []Window{{Days: []string{"sat"}, From: "22:00", To: "03:00", TimeZone: "Europe/Berlin"}}, "2026-03-29T00:59:59Z", true},
		{"berlin spring night: 03:00 CEST", []Window{{Days: []string{"sat"}, From: "22:00", To: "03:00", TimeZone: "Europe/Berlin"}}, "2026-03-29T01:00:00Z", false},
	} {
		want := miss
		if c.hit {
			want = hit
		}
		cases = append(cases, gwCase{name: c.name, policies: pol(c.w...), req: req, now: at(c.now), want: want})
	}
	runGatewayCases(t, cases)
}

// usageOf records n calls to tool by agent at now - age each, with tokens.
func usageOf(n int, agent, tool string, age time.Duration, tokens float64) []refUsed {
	var out []refUsed
	for range n {
		out = append(out, refUsed{At: t0.Add(-age), Agent: agent, Session: "s1", Tool: tool, Tokens: tokens})
	}
	return out
}

// TestGatewayLimits: rate limits and token budgets at max-1, max, max+1,
// and what counts toward them.
func TestGatewayLimits(t *testing.T) {
	t.Parallel()
	rate := func(max int64, window, per string) []Policy {
		return []Policy{ordered("p", gwRule("r", "deny", withWhen(When{RateLimit: &Limit{Max: max, Window: window, Per: per}}))), catchAll()}
	}
	budget := func(max int64, window, per string) []Policy {
		return []Policy{ordered("p", gwRule("b", "deny", withWhen(When{TokenBudget: &Limit{Max: max, Window: window, Per: per}}))), catchAll()}
	}
	u := func(calls ...[]refUsed) *refUsage {
		out := &refUsage{}
		for _, c := range calls {
			out.calls = append(out.calls, c...)
		}
		return out
	}
	pay := `{"tool_name":"pay","agent_id":"agent-1","session_id":"s1"}`
	hit, miss, bhit := deniedBy("p", "r"), fallback(), deniedBy("p", "b")
	runGatewayCases(t, []gwCase{
		{name: "rate: max-1", policies: rate(10, "1h", "agent"), req: pay, usage: u(usageOf(9, "agent-1", "pay", time.Minute, 0)), want: miss},
		{name: "rate: max", policies: rate(10, "1h", "agent"), req: pay, usage: u(usageOf(10, "agent-1", "pay", time.Minute, 0)), want: hit},
		{name: "rate: max+1", policies: rate(10, "1h", "agent"), req: pay, usage: u(usageOf(11, "agent-1", "pay", time.Minute, 0)), want: hit},
		{name: "rate: no usage", policies: rate(1, "1h", "agent"), req: pay, want: miss},
		{name: "rate: other tools do not count", policies: rate(2, "1h", "agent"), req: pay, usage: u(usageOf(5, "agent-1", "Bash", time.Minute, 0), usageOf(1, "agent-1", "pay", 0, 0)), want: miss},
		{name: "rate: other agents do not count", policies: rate(2, "1h", "agent"), req: pay, usage: u(usageOf(5, "agent-2", "pay", time.Minute, 0), usageOf(1, "agent-1", "pay", 0, 0)), want: miss},
		{name: "rate: agents fold", policies: rate(2, "1h", "agent"), req: pay, usage: u(usageOf(1, "AGENT-1", "pay", time.Minute, 0), usageOf(1, "Agent-1", "pay", 0, 0)), want: hit},
		{name: "rate: the window's start is excluded", policies: rate(2, "1h", "agent"), req: pay, usage: u(usageOf(1, "agent-1", "pay", time.Hour, 0), usageOf(1, "agent-1", "pay", 0, 0)), want: miss},
		{name: "rate: just inside the window", policies: rate(2, "1h", "agent"), req: pay, usage: u(usageOf(1, "agent-1", "pay", time.Hour-time.Nanosecond, 0), usageOf(1, "agent-1", "pay", 0, 0)), want: hit},
		{name: "rate: the future is not counted", policies: rate(1, "1h", "agent"), req: pay, usage: u(usageOf(1, "agent-1", "pay", -time.Second, 0)), want: miss},
		{name: "rate: days", policies: rate(2, "7d", "agent"), req: pay, usage: u(usageOf(2, "agent-1", "pay", 6*24*time.Hour, 0)), want: hit},
		{name: "rate: days, outside", policies: rate(2, "7d", "agent"), req: pay, usage: u(usageOf(2, "agent-1", "pay", 7*24*time.Hour, 0)), want: miss},
		{name: "rate: seconds", policies: rate(1, "90s", ""), req: pay, usage: u(usageOf(1, "agent-1", "pay", 89*time.Second, 0)), want: hit},
		{name: "rate: per session", policies: rate(2, "1h", "session"), req: `{"tool_name":"pay","agent_id":"other","session_id":"s1"}`,
			usage: u(usageOf(2, "agent-1", "pay", time.Minute, 0)), want: hit},
		{name: "rate: per session, other session", policies: rate(2, "1h", "session"), req: `{"tool_name":"pay","agent_id":"agent-1","session_id":"s2"}`,
			usage: u(usageOf(2, "agent-1", "pay", time.Minute, 0)), want: miss},
		{name: "rate: no agent_id shares one bucket", policies: rate(2, "1h", "agent"), req: `{"tool_name":"pay"}`,
			usage: u(usageOf(2, "", "pay", time.Minute, 0)), want: hit},
		{name: "rate: a non-string agent_id shares it too", policies: rate(2, "1h", "agent"), req: `{"tool_name":"pay","agent_id":5}`,
			usage: u(usageOf(2, "", "pay", time.Minute, 0)), want: hit},
		{name: "rate: an allow rule fires only at the ceiling", policies: []Policy{tiered("p",
			gwRule("a", "allow", withWhen(When{RateLimit: &Limit{Max: 3, Window: "1h"}})))}, req: pay,
			usage: u(usageOf(2, "agent-1", "pay", time.Minute, 0)), want: defaultDeny("p")},
		{name: "rate: allow plus a higher-tier deny, under the limit", policies: []Policy{tiered("p",
			gwRule("ok", "allow"), gwRule("limit", "deny", withPriority(10), withWhen(When{RateLimit: &Limit{Max: 3, Window: "1h"}})))}, req: pay,
			usage: u(usageOf(2, "agent-1", "pay", time.Minute, 0)), want: allowedBy("p", "ok")},
		{name: "rate: allow plus a higher-tier deny, at the limit", policies: []Policy{tiered("p",
			gwRule("ok", "allow"), gwRule("limit", "deny", withPriority(10), withWhen(When{RateLimit: &Limit{Max: 3, Window: "1h"}})))}, req: pay,
			usage: u(usageOf(3, "agent-1", "pay", time.Minute, 0)), want: deniedBy("p", "limit")},
		// tokenBudget: used + this call's tokens > max.
		{name: "budget: max-1", policies: budget(100, "24h", "agent"), req: `{"tool_name":"a","agent_id":"agent-1","tokens":39}`,
			usage: u(usageOf(2, "agent-1", "b", time.Hour, 30)), want: miss},
		{name: "budget: max", policies: budget(100, "24h", "agent"), req: `{"tool_name":"a","agent_id":"agent-1","tokens":40}`,
			usage: u(usageOf(2, "agent-1", "b", time.Hour, 30)), want: miss},
		{name: "budget: max+1", policies: budget(100, "24h", "agent"), req: `{"tool_name":"a","agent_id":"agent-1","tokens":41}`,
			usage: u(usageOf(2, "agent-1", "b", time.Hour, 30)), want: bhit},
		{name: "budget: used alone over", policies: budget(100, "24h", "agent"), req: `{"tool_name":"a","agent_id":"agent-1"}`,
			usage: u(usageOf(101, "agent-1", "b", time.Hour, 1)), want: bhit},
		{name: "budget: used alone at max", policies: budget(100, "24h", "agent"), req: `{"tool_name":"a","agent_id":"agent-1"}`,
			usage: u(usageOf(100, "agent-1", "b", time.Hour, 1)), want: miss},
		{name: "budget: this call alone", policies: budget(100, "24h", "agent"), req: `{"tool_name":"a","agent_id":"agent-1","tokens":100.5}`, want: bhit},
		{name: "budget: negative tokens are 0", policies: budget(100, "24h", "agent"), req: `{"tool_name":"a","agent_id":"agent-1","tokens":-50}`,
			usage: u(usageOf(101, "agent-1", "b", time.Hour, 1)), want: bhit},
		{name: "budget: string tokens are 0", policies: budget(100, "24h", "agent"), req: `{"tool_name":"a","agent_id":"agent-1","tokens":"500"}`, want: miss},
		{name: "budget: outside the window", policies: budget(100, "1h", "agent"), req: `{"tool_name":"a","agent_id":"agent-1","tokens":1}`,
			usage: u(usageOf(1, "agent-1", "b", time.Hour, 100)), want: miss},
		{name: "budget: per session", policies: budget(100, "1h", "session"), req: `{"tool_name":"a","agent_id":"x","session_id":"s1","tokens":1}`,
			usage: u(usageOf(1, "agent-1", "b", time.Minute, 100)), want: bhit},
		{name: "budget: no session_id is its own bucket", policies: budget(100, "1h", "session"), req: `{"tool_name":"a","tokens":1}`,
			usage: u(usageOf(1, "agent-1", "b", time.Minute, 100)), want: miss},
	})
}

// TestGatewayDefaults: defaultEffect omitted is allow for an ordered policy
// and deny (without a code) for a tiered one; the first policy's decides.
func TestGatewayDefaults(t *testing.T) {
	t.Parallel()
	noMatch := gwRule("r", "deny", withTools("Bash"))
	withDefault := func(p Policy, d string) Policy { p.DefaultEffect = d; return p }
	high := func(p Policy) Policy { p.Priority = 1; return p }
	runGatewayCases(t, []gwCase{
		{name: "ordered omitted", policies: []Policy{ordered("p", noMatch)}, req: `{"tool_name":"x"}`, want: defaultAllow},
		{name: "tiered omitted", policies: []Policy{tiered("p", noMatch)}, req: `{"tool_name":"x"}`, want: defaultDeny("p")},
		{name: "tiered allow", policies: []Policy{withDefault(tiered("p", noMatch), "allow")}, req: `{"tool_name":"x"}`, want: defaultAllow},
		{name: "ordered deny", policies: []Policy{withDefault(ordered("p", noMatch), "deny")}, req: `{"tool_name":"x"}`, want: defaultDeny("p")},
		{name: "first is tiered", policies: []Policy{high(tiered("t", noMatch)), ordered("o", noMatch)}, req: `{"tool_name":"x"}`, want: defaultDeny("t")},
		{name: "first is ordered", policies: []Policy{high(ordered("o", noMatch)), tiered("t", noMatch)}, req: `{"tool_name":"x"}`, want: defaultAllow},
	})
}

// TestGatewayWarningsOrder: warnings list every warn verdict in scan order
// across policies, tool level before resources, whatever decides.
func TestGatewayWarningsOrder(t *testing.T) {
	t.Parallel()
	first := Policy{ID: "a-first", Version: 1, Priority: 3, Evaluation: EvaluationTiered, Rules: []Rule{
		gwRule("res", "warn", boundTo("table", "t2")), gwRule("tool", "warn", withDescription("tool level of a-first"))}}
	second := Policy{ID: "b-second", Version: 1, Priority: 3, Rules: []Rule{gwRule("w1", "warn"), gwRule("a", "allow"), gwRule("w2", "warn", withDescription("second's w2"))}}
	third := Policy{ID: "c-third", Version: 1, Priority: 1, Rules: []Rule{gwRule("ok", "allow")}}
	req := `{"tool_name":"x","resources":[{"type":"table","name":"t1"},{"type":"table","name":"t2"}]}`
	all := []string{"tool level of a-first", warnReason("a-first", "res"), warnReason("b-second", "w1"), "second's w2"}
	runGatewayCases(t, []gwCase{
		{name: "later allow decides", policies: []Policy{first, second, third}, req: req, want: allowedBy("c-third", "ok").warned(all...)},
		{name: "last warn decides", policies: []Policy{first, second}, req: req,
			want: gwExpect{decision: Allow, effect: EffectWarn, policy: "b-second", rule: "w2", reason: "second's w2", warnings: all}},
		{name: "deny after them", policies: []Policy{first, second, ordered("d-deny", gwRule("no", "deny"))}, req: req,
			want: deniedBy("d-deny", "no").warned(all...)},
		{name: "no warnings is absent", policies: []Policy{third}, req: req, want: allowedBy("c-third", "ok")},
	})
}

// TestGatewayTraceNamesFailedFilter: the explain trace says which filter
// failed first, in the order subjects, targets, select, when, conditions:
// each request fails its filter and every later one. Targets are a server,
// not a tool: a rule bound to other tools is, like a tool_name condition
// today, never reached through the tool index and so not in the trace.
func TestGatewayTraceNamesFailedFilter(t *testing.T) {
	t.Parallel()
	rule := gwRule("r", "deny", withRoles("ci"), withServers("db"), withSelect(Select{Action: []string{"call"}}),
		withWhen(When{Environments: []string{"prod"}}), withConds(cond("input.command", "contains", "rm")))
	for _, tc := range []struct{ req, failed string }{
		{`{"tool_name":"mcp__fs__q","roles":["dev"],"action":"read","environment":"dev"}`, "subjects"},
		{`{"tool_name":"mcp__fs__q","roles":["ci"],"action":"read","environment":"dev"}`, "targets"},
		{`{"tool_name":"mcp__db__q","roles":["ci"],"action":"read","environment":"dev"}`, "select"},
		{`{"tool_name":"mcp__db__q","roles":["ci"],"environment":"dev"}`, "when"},
		{`{"tool_name":"mcp__db__q","roles":["ci"],"environment":"prod","input":{"command":"ls"}}`, "conditions"},
		{`{"tool_name":"mcp__db__q","roles":["ci"],"environment":"prod","input":{"command":"rm"}}`, ""},
	} {
		for _, p := range []Policy{ordered("p", rule), tiered("p", rule)} {
			c := mustCompile(t, Bundle{Policies: []Policy{p}})
			res := c.Evaluate(gwRequest(t, tc.req), EvalOptions{Now: fixedClock(t0), Explain: true})
			var found *TraceRule
			for i := range res.Trace {
				if res.Trace[i].RuleID == "r" {
					found = &res.Trace[i]
				}
			}
			switch {
			case found == nil:
				t.Errorf("%s %s: rule r not in the trace %+v", p.Evaluation, tc.req, res.Trace)
			case found.Failed != tc.failed || found.Matched != (tc.failed == ""):
				t.Errorf("%s %s: trace says failed %q matched %v, want failed %q", p.Evaluation, tc.req, found.Failed, found.Matched, tc.failed)
			}
			if got := refFilter(rule, refRead(gwRequest(t, tc.req)), refScope{mode: "ordered"}, t0, nil); got != tc.failed {
				t.Errorf("reference: failed %q, want %q", got, tc.failed)
			}
		}
	}
}

// gatewayValidPolicy uses every new field, validly.
func gatewayValidPolicy() Policy {
	return Policy{ID: "gw", Version: 1, Evaluation: EvaluationTiered, Rules: []Rule{
		{ID: "r0", Priority: 100, Effect: "allow",
			Subjects: &Subjects{Agents: []string{"build-agent"}, Roles: []string{"ci"}},
			Targets:  &Targets{Servers: []string{"github"}, Tools: []string{"Bash"}, Resources: []ResourceTarget{{Type: "table", Names: []string{"orders", "invoices"}}}},
			Select: &Select{Action: []string{"call"}, SideEffect: []string{"write", "delete"}, Tool: "/^mcp__github__/", ResourceType: "table",
				Context: map[string]json.RawMessage{"region": raw("eu"), "n": raw(5), "on": raw(true)}},
			When: &When{
				Schedule:        []Window{{Days: []string{"mon", "tue", "wed", "thu", "fri", "sat", "sun"}, From: "08:00", To: "18:00", TimeZone: "Europe/Berlin"}, {From: "23:00", To: "01:00"}},
				Environments:    []string{"prod"},
				Sensitivity:     []string{"pii"},
				ActorConfidence: []string{"verified"},
				RateLimit:       &Limit{Max: 10, Window: "1h", Per: "agent"},
				TokenBudget:     &Limit{Max: 200000, Window: "24h", Per: "session"},
			},
			Conditions: []Condition{
				cond("input.command", "not_contains", "rm -rf"),
				{Any: []Condition{cond("kwargs.amount", "lte", 1000), {All: []Condition{cond("agent_id", "eq", "cfo-bot"), cond("kwargs.currency", "eq", "EUR")}}}},
			}},
		{ID: "r1", Priority: -5, Effect: "warn"},
		{ID: "r2", Effect: "audit", When: &When{RateLimit: &Limit{Max: 1, Window: "1s"}, TokenBudget: &Limit{Max: 1, Window: "31d"}}},
		{ID: "r3", Effect: "deny", When: &When{RateLimit: &Limit{Max: 1, Window: "744h"}, Schedule: []Window{{From: "00:00", To: "23:59"}}}},
	}}
}

// unprioritized puts every rule of p in tier 0, so a case about the
// evaluation mode or one priority gets one diagnostic.
func unprioritized(p *Policy) {
	for i := range p.Rules {
		p.Rules[i].Priority = 0
	}
}

// TestGatewayCheckPolicy: every malformed new field is refused with its
// field path (issue 9 section 4).
func TestGatewayCheckPolicy(t *testing.T) {
	t.Parallel()
	// Each case below must be refused for its one mutation alone.
	if d := CheckPolicy(gatewayValidPolicy()); len(d) != 0 {
		t.Errorf("the valid gateway policy has diagnostics: %v", d)
	}
	if p := refPolicyProblems(gatewayValidPolicy()); len(p) != 0 {
		t.Errorf("the reference finds problems in the valid gateway policy: %v", p)
	}
	r0 := func(f func(r *Rule)) func(*Policy) { return func(p *Policy) { f(&p.Rules[0]) } }
	for _, tc := range []struct {
		name   string
		mutate func(*Policy)
		field  string // exact Field of the one diagnostic
	}{
		{"evaluation", func(p *Policy) { unprioritized(p); p.Evaluation = "gateway" }, "spec.evaluation"},
		{"evaluation case", func(p *Policy) { unprioritized(p); p.Evaluation = "Tiered" }, "spec.evaluation"},
		{"priority in an ordered policy", func(p *Policy) { unprioritized(p); p.Rules[3].Priority = 1; p.Evaluation = "" }, "spec.rules[3].priority"},
		{"priority in an explicitly ordered policy", func(p *Policy) {
			p.Evaluation = EvaluationOrdered
			p.Rules[0].Priority = 0
			p.Rules[1].Priority = 0
			p.Rules[2].Priority = 3
		}, "spec.rules[2].priority"},
		{"effect", r0(func(r *Rule) { r.Effect = "block" }), "spec.rules[0].effect"},
		{"effect case", r0(func(r *Rule) { r.Effect = "Warn" }), "spec.rules[0].effect"},
		{"empty agents", r0(func(r *Rule) { r.Subjects.Agents = []string{} }), "spec.rules[0].subjects.agents"},
		{"empty roles", r0(func(r *Rule) { r.Subjects.Roles = []string{} }), "spec.rules[0].subjects.roles"},
		{"empty servers", r0(func(r *Rule) { r.Targets.Servers = []string{} }), "spec.rules[0].targets.servers"},
		{"empty tools", r0(func(r *Rule) { r.Targets.Tools = []string{} }), "spec.rules[0].targets.tools"},
		{"empty resources", r0(func(r *Rule) { r.Targets.Resources = []ResourceTarget{} }), "spec.rules[0].targets.resources"},
		{"empty resource names", r0(func(r *Rule) { r.Targets.Resources[0].Names = []string{} }), "spec.rules[0].targets.resources[0].names"},
		{"no resource names", r0(func(r *Rule) { r.Targets.Resources[0].Names = nil }), "spec.rules[0].targets.resources[0].names"},
		{"empty action", r0(func(r *Rule) { r.Select.Action = []string{} }), "spec.rules[0].select.action"},
		{"empty sideEffect", r0(func(r *Rule) { r.Select.SideEffect = []string{} }), "spec.rules[0].select.sideEffect"},
		{"bad select.tool regex", r0(func(r *Rule) { r.Select.Tool = "/(/" }), "spec.rules[0].select.tool"},
		{"select.tool lookahead", r0(func(r *Rule) { r.Select.Tool = "/a(?=b)/" }), "spec.rules[0].select.tool"},
		{"empty schedule", r0(func(r *Rule) { r.When.Schedule = []Window{} }), "spec.rules[0].when.schedule"},
		{"unknown day", r0(func(r *Rule) { r.When.Schedule[0].Days[2] = "Wed" }), "spec.rules[0].when.schedule[0].days[2]"},
		{"unknown day name", r0(func(r *Rule) { r.When.Schedule[1].Days = []string{"monday"} }), "spec.rules[0].when.schedule[1].days[0]"},
		{"empty days", r0(func(r *Rule) { r.When.Schedule[0].Days = []string{} }), "spec.rules[0].when.schedule[0].days"},
		{"from one digit hour", r0(func(r *Rule) { r.When.Schedule[0].From = "8:00" }), "spec.rules[0].when.schedule[0].from"},
		{"from 24:00", r0(func(r *Rule) { r.When.Schedule[0].From = "24:00" }), "spec.rules[0].when.schedule[0].from"},
		{"from empty", r0(func(r *Rule) { r.When.Schedule[0].From = "" }), "spec.rules[0].when.schedule[0].from"},
		{"to minutes 60", r0(func(r *Rule) { r.When.Schedule[0].To = "18:60" }), "spec.rules[0].when.schedule[0].to"},
		{"to with seconds", r0(func(r *Rule) { r.When.Schedule[1].To = "01:00:00" }), "spec.rules[0].when.schedule[1].to"},
		{"unknown time zone", r0(func(r *Rule) { r.When.Schedule[0].TimeZone = "Europe/Atlantis" }), "spec.rules[0].when.schedule[0].timeZone"},
		{"empty environments", r0(func(r *Rule) { r.When.Environments = []string{} }), "spec.rules[0].when.environments"},
		{"empty sensitivity", r0(func(r *Rule) { r.When.Sensitivity = []string{} }), "spec.rules[0].when.sensitivity"},
		{"empty actorConfidence", r0(func(r *Rule) { r.When.ActorConfidence = []string{} }), "spec.rules[0].when.actorConfidence"},
		{"rateLimit max 0", r0(func(r *Rule) { r.When.RateLimit.Max = 0 }), "spec.rules[0].when.rateLimit.max"},
		{"rateLimit max -1", r0(func(r *Rule) { r.When.RateLimit.Max = -1 }), "spec.rules[0].when.rateLimit.max"},
		{"rateLimit window under 1s", r0(func(r *Rule) { r.When.RateLimit.Window = "999ms" }), "spec.rules[0].when.rateLimit.window"},
		{"rateLimit window over 31d", r0(func(r *Rule) { r.When.RateLimit.Window = "32d" }), "spec.rules[0].when.rateLimit.window"},
		{"rateLimit window over 31d in hours", r0(func(r *Rule) { r.When.RateLimit.Window = "745h" }), "spec.rules[0].when.rateLimit.window"},
		{"rateLimit window unparsable", r0(func(r *Rule) { r.When.RateLimit.Window = "1w" }), "spec.rules[0].when.rateLimit.window"},
		{"rateLimit window empty", r0(func(r *Rule) { r.When.RateLimit.Window = "" }), "spec.rules[0].when.rateLimit.window"},
		{"rateLimit per", r0(func(r *Rule) { r.When.RateLimit.Per = "pod" }), "spec.rules[0].when.rateLimit.per"},
		{"tokenBudget max 0", r0(func(r *Rule) { r.When.TokenBudget.Max = 0 }), "spec.rules[0].when.tokenBudget.max"},
		{"tokenBudget window 0s", r0(func(r *Rule) { r.When.TokenBudget.Window = "0s" }), "spec.rules[0].when.tokenBudget.window"},
		{"tokenBudget window over 31d", r0(func(r *Rule) { r.When.TokenBudget.Window = "100d" }), "spec.rules[0].when.tokenBudget.window"},
		{"tokenBudget per", r0(func(r *Rule) { r.When.TokenBudget.Per = "Agent" }), "spec.rules[0].when.tokenBudget.per"},
		{"leaf inside any", r0(func(r *Rule) { r.Conditions[1].Any[0] = cond("kwargs.amount", "lte", "x") }), "spec.rules[0].conditions[1].any[0].value"},
		{"leaf inside all", r0(func(r *Rule) { r.Conditions[1].Any[1].All[1] = cond("kwargs..currency", "eq", "EUR") }), "spec.rules[0].conditions[1].any[1].all[1].field"},
		{"regex inside all", r0(func(r *Rule) { r.Conditions[1].Any[1].All[0] = cond("a", "matches", "(?=x)") }), "spec.rules[0].conditions[1].any[1].all[0].value"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := gatewayValidPolicy()
			tc.mutate(&p)
			diags := CheckPolicy(p)
			if len(diags) != 1 || diags[0].Field != tc.field {
				t.Errorf("diagnostics %v, want one at %s", diags, tc.field)
			}
			for _, d := range diags {
				if d.PolicyID != "gw" || d.Location.String() != d.Field || d.Message == "" {
					t.Errorf("malformed diagnostic %+v", d)
				}
				checkDiagnosticString(t, d)
			}
			if len(refPolicyProblems(p)) == 0 {
				t.Errorf("the reference accepts it")
			}
		})
	}
}

// TestGatewayCheckPolicyNesting: any -> all -> leaf is as deep as it goes;
// the diagnostic points into the rule's conditions where it goes deeper.
// Where exactly under the group it points is the engine's choice, so only
// the prefix is pinned.
func TestGatewayCheckPolicyNesting(t *testing.T) {
	t.Parallel()
	leaf := cond("a", "eq", 1)
	for _, tc := range []struct {
		name   string
		c      Condition
		prefix string
	}{
		{"any in any", Condition{Any: []Condition{leaf, {Any: []Condition{leaf}}}}, "spec.rules[0].conditions[0].any[1]"},
		{"any in all in any", Condition{Any: []Condition{{All: []Condition{leaf, {Any: []Condition{leaf}}}}}}, "spec.rules[0].conditions[0].any[0].all[1]"},
		{"all in all in any", Condition{Any: []Condition{{All: []Condition{{All: []Condition{leaf}}}}}}, "spec.rules[0].conditions[0].any[0].all[0]"},
		{"empty any", Condition{Any: []Condition{}}, "spec.rules[0].conditions[0]"},
		{"empty all", Condition{Any: []Condition{{All: []Condition{}}}}, "spec.rules[0].conditions[0].any[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := Policy{ID: "gw", Rules: []Rule{{ID: "r", Effect: "deny", Conditions: []Condition{tc.c}}}}
			diags := CheckPolicy(p)
			if len(diags) != 1 || !strings.HasPrefix(diags[0].Field, tc.prefix) {
				t.Errorf("diagnostics %v, want one under %s", diags, tc.prefix)
			}
			if len(refPolicyProblems(p)) == 0 {
				t.Errorf("the reference accepts it")
			}
		})
	}
	ok := Policy{ID: "gw", Rules: []Rule{{ID: "r", Effect: "deny", Conditions: []Condition{{Any: []Condition{leaf, {All: []Condition{leaf, leaf}}}}}}}}
	if d := CheckPolicy(ok); len(d) != 0 {
		t.Errorf("any -> all -> leaf: %v", d)
	}
}

// TestGatewayCheckPolicyBounds: what sits on a bound is valid.
func TestGatewayCheckPolicyBounds(t *testing.T) {
	t.Parallel()
	for _, l := range []Limit{{Max: 1, Window: "1s"}, {Max: 1, Window: "31d"}, {Max: 1, Window: "744h"}, {Max: 1, Window: "1000ms"}, {Max: 1 << 40, Window: "90s", Per: "session"}} {
		p := Policy{ID: "gw", Rules: []Rule{{ID: "r", Effect: "deny", When: &When{RateLimit: &l, TokenBudget: &l}}}}
		if d := CheckPolicy(p); len(d) != 0 {
			t.Errorf("%+v: %v", l, d)
		}
	}
	for _, w := range []Window{{From: "00:00", To: "23:59"}, {From: "23:59", To: "00:00"}, {From: "19:59", To: "20:00", TimeZone: "Asia/Kolkata"}} {
		p := Policy{ID: "gw", Rules: []Rule{{ID: "r", Effect: "deny", When: &When{Schedule: []Window{w}}}}}
		if d := CheckPolicy(p); len(d) != 0 {
			t.Errorf("%+v: %v", w, d)
		}
	}
	same := Policy{ID: "gw", Rules: []Rule{{ID: "r", Effect: "deny", When: &When{Schedule: []Window{{From: "08:00", To: "08:00"}}}}}}
	if d := CheckPolicy(same); len(d) != 1 || !strings.HasPrefix(d[0].Field, "spec.rules[0].when.schedule[0]") {
		t.Errorf("from == to: %v", d)
	}
	badKey := Policy{ID: "gw", Rules: []Rule{{ID: "r", Effect: "deny", Select: &Select{Context: map[string]json.RawMessage{"a.b": raw(1)}}}}}
	if d := CheckPolicy(badKey); len(d) != 1 || !strings.HasPrefix(d[0].Field, "spec.rules[0].select.context") {
		t.Errorf("context key a.b: %v", d)
	}
	for _, k := range []string{"", "__proto__", "constructor", "prototype"} {
		p := Policy{ID: "gw", Rules: []Rule{{ID: "r", Effect: "deny", Select: &Select{Context: map[string]json.RawMessage{k: raw(1)}}}}}
		if d := CheckPolicy(p); len(d) != 1 {
			t.Errorf("context key %q: %v", k, d)
		}
	}
	for _, v := range []string{"null", "{}", "[1]"} {
		p := Policy{ID: "gw", Rules: []Rule{{ID: "r", Effect: "deny", Select: &Select{Context: map[string]json.RawMessage{"k": json.RawMessage(v)}}}}}
		if d := CheckPolicy(p); len(d) != 1 {
			t.Errorf("context value %s: %v", v, d)
		}
	}
}

// TestGatewayUsageKeys: the engine asks Usage under the key the limit
// names, with the call's tool, at the injected clock.
func TestGatewayUsageKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		per, req string
		want     UsageKey
	}{
		{"agent", `{"tool_name":"pay","agent_id":"Agent-\u212a","session_id":"s"}`, UsageKey{ID: "agent-k"}},
		{"", `{"tool_name":"pay","agent_id":"b"}`, UsageKey{ID: "b"}},
		{"agent", `{"tool_name":"pay"}`, UsageKey{}},
		{"session", `{"tool_name":"pay","agent_id":"a","session_id":"S1"}`, UsageKey{Session: true, ID: "S1"}},
		{"session", `{"tool_name":"pay","session_id":7}`, UsageKey{Session: true}},
	} {
		rec := &recordingUsage{}
		p := ordered("p", gwRule("r", "deny", withWhen(When{RateLimit: &Limit{Max: 1, Window: "1h", Per: tc.per}})))
		c := mustCompile(t, Bundle{Policies: []Policy{p}})
		c.Evaluate(gwRequest(t, tc.req), EvalOptions{Now: fixedClock(t0), Usage: rec})
		want := []string{fmt.Sprintf("calls %+v pay 1h0m0s %s", tc.want, t0.Format(time.RFC3339Nano))}
		if !slices.Equal(rec.asked, want) {
			t.Errorf("%s per %q: asked %q, want %q", tc.req, tc.per, rec.asked, want)
		}
		if a, s := UsageKeys(gwRequest(t, tc.req)); (tc.per == "session" && s != tc.want) || (tc.per != "session" && a != tc.want) {
			t.Errorf("UsageKeys(%s) = %+v %+v", tc.req, a, s)
		}
	}
}

type recordingUsage struct{ asked []string }

func (r *recordingUsage) Calls(key UsageKey, tool string, window time.Duration, now time.Time) int64 {
	r.asked = append(r.asked, fmt.Sprintf("calls %+v %s %s %s", key, tool, window, now.UTC().Format(time.RFC3339Nano)))
	return 0
}

func (r *recordingUsage) Tokens(key UsageKey, window time.Duration, now time.Time) float64 {
	r.asked = append(r.asked, fmt.Sprintf("tokens %+v %s %s", key, window, now.UTC().Format(time.RFC3339Nano)))
	return 0
}

// TestGatewayCodesDenyEffect: every coded result's effect is deny.
func TestGatewayCodesDenyEffect(t *testing.T) {
	t.Parallel()
	many := ordered("many")
	for i := range 200 {
		many.Rules = append(many.Rules, gwRule(fmt.Sprintf("r%d", i), "allow"))
	}
	broken := tiered("broken", gwRule("r", "warn", withSelect(Select{Tool: "/(/"})))
	var nilCompiled *Compiled
	for _, tc := range []struct {
		code Code
		c    *Compiled
		req  Request
		opts EvalOptions
	}{
		{CodeNoPolicies, nilCompiled, Request{"tool_name": "x"}, EvalOptions{}},
		{CodeNoPolicies, mustCompile(t, Bundle{}), Request{"tool_name": "x"}, EvalOptions{}},
		{CodeAgentFrozen, mustCompile(t, Bundle{Policies: []Policy{tiered("p", gwRule("a", "allow"))}, FrozenAgents: []FrozenAgent{{ID: "agent-1"}}}),
			Request{"tool_name": "x", "agent_id": "Agent-1"}, EvalOptions{}},
		{CodePolicyCompileError, func() *Compiled { c, _ := Compile(Bundle{Policies: []Policy{broken}}); return c }(), Request{"tool_name": "x"}, EvalOptions{}},
		{CodeEvalTimeout, mustCompile(t, Bundle{Policies: []Policy{many}}), Request{"tool_name": "x"}, EvalOptions{Now: tickingClock(t0, time.Second)}},
	} {
		opts := tc.opts
		if opts.Now == nil {
			opts.Now = fixedClock(t0)
		}
		res := tc.c.Evaluate(tc.req, opts)
		if res.Code != tc.code || res.Decision != Deny || res.Effect != EffectDeny {
			t.Errorf("%s: %+v, want a deny with effect deny", tc.code, res)
		}
		doc, err := res.AppendJSON(nil)
		if err != nil || !strings.Contains(string(doc), `"effect":"deny"`) {
			t.Errorf("%s: %s (%v)", tc.code, doc, err)
		}
	}
}

// TestGatewayResultJSON: effect always written, matchedResource when a
// resource decided, warnings only when there are some.
func TestGatewayResultJSON(t *testing.T) {
	t.Parallel()
	c := mustCompile(t, Bundle{Policies: []Policy{tiered("p", gwRule("a", "allow"), gwRule("r", "allow", boundTo("table", "orders"), withRoles("x")),
		gwRule("w", "warn", withTools("Write")))}})
	for _, tc := range []struct {
		req  string
		want []string
		not  []string
	}{
		{`{"tool_name":"q","resources":[{"type":"table","name":"orders"}]}`,
			[]string{`"decision":"deny"`, `"effect":"deny"`, `"matchedRuleId":null`, `"matchedResource":{"type":"table","name":"orders"}`, `"code":"IMPLICIT_DENY"`,
				`"reason":"no rule bound to resource table/orders matched in policy \"p\""`},
			[]string{`"warnings"`}},
		{`{"tool_name":"q"}`, []string{`"decision":"allow"`, `"effect":"allow"`, `"matchedRuleId":"a"`}, []string{`"warnings"`, `"matchedResource"`, `"code"`}},
		{`{"tool_name":"Write"}`, []string{`"effect":"warn"`, `"warnings":["warned by rule \"w\" of policy \"p\""]`}, []string{`"matchedResource"`}},
	} {
		res := c.Evaluate(gwRequest(t, tc.req), EvalOptions{Now: fixedClock(t0)})
		doc, err := res.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, w := range tc.want {
			if !strings.Contains(string(doc), w) {
				t.Errorf("%s: %s lacks %s", tc.req, doc, w)
			}
		}
		for _, n := range tc.not {
			if strings.Contains(string(doc), n) {
				t.Errorf("%s: %s has %s", tc.req, doc, n)
			}
		}
		var back Result
		if err := json.Unmarshal(doc, &back); err != nil || back.Effect != res.Effect || back.MatchedResource != res.MatchedResource || !slices.Equal(back.Warnings, res.Warnings) {
			t.Errorf("%s: round trip %+v (%v), want %+v", tc.req, back, err, res)
		}
	}
}

// A select.tool regex reads tool_name as matches does: a tool_name that is
// not a string is missing, so even /.*/ does not hold.
func TestGatewaySelectToolNeedsStringTool(t *testing.T) {
	t.Parallel()
	c := mustCompile(t, Bundle{Policies: []Policy{{ID: "p", Rules: []Rule{
		{ID: "any-tool", Effect: "deny", Select: &Select{Tool: "/.*/"}},
	}}}})
	for _, req := range []Request{{"agent_id": "a"}, {"tool_name": 5.0}} {
		if got := c.Evaluate(req, EvalOptions{}); got.Decision != Allow || got.MatchedRuleID != "" {
			t.Errorf("%v: %+v, want the default allow", req, got)
		}
	}
	if got := c.Evaluate(Request{"tool_name": "Bash"}, EvalOptions{}); got.MatchedRuleID != "any-tool" {
		t.Errorf("a string tool_name: %+v, want rule any-tool", got)
	}
}

// TestUsageWindowIsTheLongestLimitWindow: what a usage ledger may forget
// depends on it (a counter older than every window no limit reads), so it
// spans rate limits and token budgets of every rule, and is 0 without any.
func TestUsageWindowIsTheLongestLimitWindow(t *testing.T) {
	t.Parallel()
	compile := func(ws ...When) *Compiled {
		var rules []Rule
		for i, w := range ws {
			rules = append(rules, gwRule(fmt.Sprint("r", i), "deny", withWhen(w)))
		}
		c, diags := Compile(Bundle{Policies: []Policy{ordered("p", rules...), catchAll()}})
		if len(diags) > 0 {
			t.Fatal(diags)
		}
		return c
	}
	for _, tc := range []struct {
		name string
		c    *Compiled
		want time.Duration
	}{
		{"no bundle", nil, 0},
		{"no limits", compile(When{Environments: []string{"prod"}}), 0},
		{"a rate limit", compile(When{RateLimit: &Limit{Max: 1, Window: "90s"}}), 90 * time.Second},
		{"a token budget of days", compile(When{RateLimit: &Limit{Max: 1, Window: "1h"}}, When{TokenBudget: &Limit{Max: 1, Window: "7d"}}), 7 * 24 * time.Hour},
		{"both in one rule", compile(When{RateLimit: &Limit{Max: 1, Window: "2h"}, TokenBudget: &Limit{Max: 1, Window: "1m"}}), 2 * time.Hour},
	} {
		if got := tc.c.UsageWindow(); got != tc.want {
			t.Errorf("%s: UsageWindow %v, want %v", tc.name, got, tc.want)
		}
		if got := tc.c.WithFrozen(nil).UsageWindow(); got != tc.want {
			t.Errorf("%s, with freezes merged: UsageWindow %v, want %v", tc.name, got, tc.want)
		}
	}
}
