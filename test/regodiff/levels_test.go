package regodiff

import (
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
)

// The two levels (ClusterPolicies, then the namespace's Policies),
// PolicyExceptions and shadow (Audit) policies, case by case: OPA on the
// exported Rego must answer exactly as the engine (compare: every field,
// matchedPolicyKind, exceptionApplied and shadow included), and each case
// checks that the engine's answer shows what the case is about, so a case
// cannot pass by exercising nothing.

var levelsNow = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

type levelCase struct {
	name    string
	bundle  engine.Bundle
	request string
	now     time.Time // zero: levelsNow
	want    []string  // fragments of the engine's answer
	not     string    // ... and one it must not hold
	// timeout is an ask's wait, the engine's ApprovalTimeout, when the
	// case is about it (compare holds OPA's approvalTimeoutSeconds to it).
	timeout time.Duration
}

func decideLevelCases(t *testing.T, cases []levelCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			now := c.now
			if now.IsZero() {
				now = levelsNow
			}
			p, err := prepare(t, c.bundle)
			if err != nil {
				t.Fatalf("export: %v", err)
			}
			req, err := engine.DecodeRequest([]byte(c.request))
			if err != nil {
				t.Fatal(err)
			}
			opts := engine.EvalOptions{Now: func() time.Time { return now }}
			if _, ok := req[engine.FieldOutput]; ok {
				opts.Phase = engine.PhaseResult // as compare decides it
			}
			res := p.compiled.Evaluate(req, opts)
			answer, err := res.AppendJSON(nil)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range c.want {
				if !strings.Contains(string(answer), w) {
					t.Fatalf("the engine's answer %s: want %s in it", answer, w)
				}
			}
			if c.not != "" && strings.Contains(string(answer), c.not) {
				t.Fatalf("the engine's answer %s: want no %s in it", answer, c.not)
			}
			if c.timeout != 0 && res.ApprovalTimeout != c.timeout {
				t.Fatalf("the engine's approval timeout is %v, want %v", res.ApprovalTimeout, c.timeout)
			}
			if _, err := p.compare(t, []byte(c.request), now, nil); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func bashRule(id, effect, contains string) engine.Rule {
	return engine.Rule{ID: id, Effect: effect, Conditions: []engine.Condition{
		{Field: "tool_name", Operator: "eq", Value: jsonText("Bash")},
		{Field: "input.command", Operator: "contains", Value: jsonText(contains)}}}
}

func policy(id string, rules ...engine.Rule) engine.Policy {
	return engine.Policy{ID: id, Version: 1, Rules: rules}
}

func cluster(p engine.Policy) engine.Policy { p.Kind = engine.KindClusterPolicy; return p }
func audit(p engine.Policy) engine.Policy   { p.Mode = engine.ModeAudit; return p }
func prio(p engine.Policy, n int32) engine.Policy {
	p.Priority = n
	return p
}
func defaultDeny(p engine.Policy) engine.Policy { p.DefaultEffect = "deny"; return p }

const (
	rmRequest = `{"tool_name":"Bash","agent_id":"bot","input":{"command":"rm -rf /"}}`
	lsRequest = `{"tool_name":"Bash","agent_id":"bot","input":{"command":"ls"}}`
)

// TestRegoLevels: the most restrictive of the two levels decides, deny >
// warn > audit > allow, a tie to the namespace; matchedPolicyKind names the
// deciding level only in a bundle with ClusterPolicies.
func TestRegoLevels(t *testing.T) {
	allowAll := engine.Rule{ID: "allow-all", Effect: "allow"}
	tieredBound := engine.Policy{ID: "tables", Version: 1, Evaluation: engine.EvaluationTiered, DefaultEffect: "allow", Rules: []engine.Rule{
		{ID: "read-orders", Effect: "allow", Targets: &engine.Targets{Resources: []engine.ResourceTarget{{Type: "table", Names: []string{"orders"}}}},
			Conditions: []engine.Condition{{Field: "resource.name", Operator: "eq", Value: jsonText("nope")}}}}}
	decideLevelCases(t, []levelCase{
		{name: "cluster deny not loosened by a higher namespace allow",
			bundle:  engine.Bundle{Policies: []engine.Policy{cluster(policy("org", bashRule("no-rm-rf", "deny", "rm -rf"))), prio(policy("team", allowAll), 100)}},
			request: rmRequest, want: []string{`"matchedPolicyKind":"ClusterPolicy"`}},
		{name: "cluster default deny ends the scan",
			bundle:  engine.Bundle{Policies: []engine.Policy{cluster(defaultDeny(policy("org", bashRule("no-rm-rf", "deny", "rm -rf")))), policy("team", allowAll)}},
			request: lsRequest, want: []string{`"matchedPolicyKind":"ClusterPolicy","reason":"no rule matched and policy \"org\" denies by default"`}},
		{name: "namespace deny tightens a cluster allow",
			bundle:  engine.Bundle{Policies: []engine.Policy{cluster(prio(policy("org", allowAll), 100)), policy("team", bashRule("no-rm", "deny", "rm "))}},
			request: rmRequest, want: []string{`"matchedPolicyId":"team","matchedPolicyVersion":1,"matchedRuleId":"no-rm","matchedPolicyKind":"Policy"`}},
		{name: "cluster warn over a namespace allow, warnings of both levels",
			bundle: engine.Bundle{Policies: []engine.Policy{cluster(policy("org", bashRule("warn-bash", "warn", ""))),
				policy("team", bashRule("warn-rm", "warn", "rm"), bashRule("allow-rm", "allow", "rm"))}},
			request: rmRequest, want: []string{`"effect":"warn","matchedPolicyId":"org"`}},
		{name: "namespace audit over a cluster allow",
			bundle:  engine.Bundle{Policies: []engine.Policy{cluster(policy("org", allowAll)), policy("team", bashRule("audit-rm", "audit", "rm"))}},
			request: rmRequest, want: []string{`"effect":"audit","matchedPolicyId":"team"`}},
		{name: "equal effects go to the namespace",
			bundle:  engine.Bundle{Policies: []engine.Policy{cluster(policy("org", allowAll)), policy("team", bashRule("allow-rm", "allow", "rm"))}},
			request: rmRequest, want: []string{`"matchedPolicyId":"team","matchedPolicyVersion":1,"matchedRuleId":"allow-rm","matchedPolicyKind":"Policy"`}},
		{name: "namespace default deny over a cluster allow",
			bundle:  engine.Bundle{Policies: []engine.Policy{cluster(policy("org", allowAll)), defaultDeny(policy("team", bashRule("allow-ls", "allow", "ls ")))}},
			request: rmRequest, want: []string{`"matchedPolicyKind":"Policy","reason":"no rule matched and policy \"team\" denies by default"`}},
		{name: "cluster level alone, default allow",
			bundle:  engine.Bundle{Policies: []engine.Policy{cluster(policy("org", bashRule("no-rm-rf", "deny", "rm -rf")))}},
			request: lsRequest, want: []string{`"matchedRuleId":null,"matchedPolicyKind":"ClusterPolicy"`}},
		{name: "no verdict on either level: the namespace's default allow",
			bundle:  engine.Bundle{Policies: []engine.Policy{cluster(policy("org", bashRule("no-rm-rf", "deny", "rm -rf"))), policy("team", bashRule("no-curl", "deny", "curl"))}},
			request: lsRequest, want: []string{`"matchedRuleId":null,"matchedPolicyKind":"Policy"`}},
		{name: "a namespace policy that does not compile, after a cluster verdict",
			bundle:  engine.Bundle{Policies: []engine.Policy{cluster(policy("org", allowAll)), policy("broken")}},
			request: lsRequest, want: []string{`"code":"POLICY_COMPILE_ERROR"`}},
		{name: "a tiered ClusterPolicy's implicit deny",
			bundle:  engine.Bundle{Policies: []engine.Policy{cluster(tieredBound), policy("team", allowAll)}},
			request: `{"tool_name":"query","agent_id":"bot","resources":[{"type":"table","name":"orders"}]}`, want: []string{`"matchedPolicyKind":"ClusterPolicy","matchedResource":{"type":"table","name":"orders"},"code":"IMPLICIT_DENY"`}},
		{name: "one level: no matchedPolicyKind",
			bundle:  engine.Bundle{Policies: []engine.Policy{policy("team", bashRule("no-rm-rf", "deny", "rm -rf"))}},
			request: rmRequest, want: []string{`"matchedRuleId":"no-rm-rf"`}, not: "matchedPolicyKind"},
	})
}

// TestRegoExceptions: an exception in force (agent_id folded as freezes
// fold; expiry on input.now) exempts the call from its rules, and
// exceptionApplied names the one that changed the decision. OPA has no
// caller-vouched ServiceAccount, so exceptions by ServiceAccount never
// apply there: the engine here decides for a caller that vouches for none.
func TestRegoExceptions(t *testing.T) {
	expires := levelsNow.Add(time.Hour)
	team := policy("team", bashRule("no-rm-rf", "deny", "rm -rf"))
	exception := func(name, kind, policy string, agents []string, rules ...string) engine.Exception {
		return engine.Exception{Name: name, PolicyKind: kind, Policy: policy, RuleIDs: rules, AgentIDs: agents, ExpiresAt: expires}
	}
	migration := exception("migration", "", "team", []string{"BOT"}, "no-rm-rf")
	kelvin := `{"tool_name":"Bash","agent_id":"agent-\u212a","input":{"command":"rm -rf /"}}`
	bySA := migration
	bySA.AgentIDs, bySA.ServiceAccounts = nil, []string{"cleaner"}
	tables := engine.Policy{ID: "tables", Version: 1, Evaluation: engine.EvaluationTiered, DefaultEffect: "allow", Rules: []engine.Rule{
		{ID: "read-orders", Effect: "allow", Targets: &engine.Targets{Resources: []engine.ResourceTarget{{Type: "table", Names: []string{"orders"}}}}}}}
	query := `{"tool_name":"query","agent_id":"bot","resources":[{"type":"table","name":"orders"}]}`
	decideLevelCases(t, []levelCase{
		{name: "in force, agent id folded",
			bundle: engine.Bundle{Policies: []engine.Policy{team}, Exceptions: []engine.Exception{migration}}, request: rmRequest,
			want: []string{`"decision":"allow","effect":"allow","matchedPolicyId":null,"matchedPolicyVersion":null,"matchedRuleId":null,`, `"exceptionApplied":"migration"`}},
		{name: "in force, the Kelvin sign folds to k",
			bundle:  engine.Bundle{Policies: []engine.Policy{team}, Exceptions: []engine.Exception{exception("k", "", "team", []string{"AGENT-K"}, "no-rm-rf")}},
			request: kelvin, want: []string{`"exceptionApplied":"k"`}},
		{name: "ended at expiresAt exactly",
			bundle:  engine.Bundle{Policies: []engine.Policy{team}, Exceptions: []engine.Exception{migration}},
			request: rmRequest, now: expires, want: []string{`"matchedRuleId":"no-rm-rf"`}, not: "exceptionApplied"},
		{name: "in force a nanosecond before expiresAt",
			bundle:  engine.Bundle{Policies: []engine.Policy{team}, Exceptions: []engine.Exception{migration}},
			request: rmRequest, now: expires.Add(-time.Nanosecond), want: []string{`"exceptionApplied":"migration"`}},
		{name: "another agent",
			bundle:  engine.Bundle{Policies: []engine.Policy{team}, Exceptions: []engine.Exception{exception("m", "", "team", []string{"other"}, "no-rm-rf")}},
			request: rmRequest, want: []string{`"matchedRuleId":"no-rm-rf"`}, not: "exceptionApplied"},
		{name: "by ServiceAccount only: never without the caller's word",
			bundle:  engine.Bundle{Policies: []engine.Policy{team}, Exceptions: []engine.Exception{bySA}},
			request: rmRequest, want: []string{`"matchedRuleId":"no-rm-rf"`}, not: "exceptionApplied"},
		{name: "the exempted rule followed by another deny: the rule changed",
			bundle:  engine.Bundle{Policies: []engine.Policy{policy("team", bashRule("no-rm-rf", "deny", "rm -rf"), bashRule("no-rm", "deny", "rm "))}, Exceptions: []engine.Exception{migration}},
			request: rmRequest, want: []string{`"matchedRuleId":"no-rm","code":"no-rm"`, `"exceptionApplied":"migration"`}},
		{name: "an exempted rule after the deciding one changes nothing",
			bundle:  engine.Bundle{Policies: []engine.Policy{policy("team", bashRule("no-rm", "deny", "rm "), bashRule("no-rm-rf", "deny", "rm -rf"))}, Exceptions: []engine.Exception{migration}},
			request: rmRequest, want: []string{`"matchedRuleId":"no-rm"`}, not: "exceptionApplied"},
		{name: "a warn rule exempted: its warning goes, the effect changes",
			bundle:  engine.Bundle{Policies: []engine.Policy{policy("team", bashRule("warn-rm", "warn", "rm"))}, Exceptions: []engine.Exception{exception("quiet", "", "team", []string{"bot"}, "warn-rm")}},
			request: rmRequest, want: []string{`"effect":"allow","matchedPolicyId":null`}, not: "warnings"},
		{name: "a Policy's exception does not exempt from the ClusterPolicy of the same name",
			bundle:  engine.Bundle{Policies: []engine.Policy{cluster(team), team}, Exceptions: []engine.Exception{exception("x", "", "team", []string{"bot"}, "no-rm-rf")}},
			request: rmRequest, want: []string{`"matchedPolicyKind":"ClusterPolicy"`}, not: "exceptionApplied"},
		{name: "the ClusterPolicy's exception: the namespace's deny decides",
			bundle:  engine.Bundle{Policies: []engine.Policy{cluster(team), team}, Exceptions: []engine.Exception{exception("x", engine.KindClusterPolicy, "team", []string{"bot"}, "no-rm-rf")}},
			request: rmRequest, want: []string{`"matchedRuleId":"no-rm-rf","matchedPolicyKind":"Policy"`, `"exceptionApplied":"x"`}},
		{name: "the first by name exempting the rule that decided without exceptions",
			bundle: engine.Bundle{Policies: []engine.Policy{policy("team", bashRule("no-rm-rf", "deny", "rm -rf")), prio(policy("other", bashRule("no-curl", "deny", "curl")), -1)},
				Exceptions: []engine.Exception{exception("c-this", "", "team", []string{"bot"}, "no-rm-rf"), exception("a-other", "", "other", []string{"bot"}, "no-curl"), exception("b-this", "", "team", []string{"bot"}, "no-rm-rf")}},
			request: rmRequest, want: []string{`"exceptionApplied":"b-this"`}},
		{name: "the only rule bound to a resource exempted: an implicit deny",
			bundle:  engine.Bundle{Policies: []engine.Policy{tables}, Exceptions: []engine.Exception{exception("a-none", "", "nothing", []string{"bot"}, "x"), exception("b-tables", "", "tables", []string{"bot"}, "read-orders")}},
			request: query, want: []string{`"matchedResource":{"type":"table","name":"orders"},"code":"IMPLICIT_DENY"`, `"exceptionApplied":"b-tables"`}},
		{name: "an allow exempted into a default deny: the exception of the rule that decided without, though not first by name",
			bundle: engine.Bundle{Policies: []engine.Policy{defaultDeny(policy("team", bashRule("allow-rm", "allow", "rm")))},
				Exceptions: []engine.Exception{exception("z-rm", "", "team", []string{"bot"}, "allow-rm"), exception("a-none", "", "nothing", []string{"bot"}, "x")}},
			request: rmRequest, want: []string{`"reason":"no rule matched and policy \"team\" denies by default"`, `"exceptionApplied":"z-rm"`}},
		{name: "an exception of an unknown policy in force changes nothing",
			bundle:  engine.Bundle{Policies: []engine.Policy{team}, Exceptions: []engine.Exception{exception("a-none", "", "nothing", []string{"bot"}, "no-rm-rf")}},
			request: rmRequest, want: []string{`"matchedRuleId":"no-rm-rf"`}, not: "exceptionApplied"},
	})
}

// TestRegoShadows: Audit policies change no decision; each, alone with the
// bundle's exceptions, is recorded in shadow in evaluation order (the
// cluster level first, then priority, then name); not on AGENT_FROZEN,
// yes on NO_POLICIES.
func TestRegoShadows(t *testing.T) {
	allowAll := policy("team", engine.Rule{ID: "allow-all", Effect: "allow"})
	candidate := audit(prio(policy("candidate", bashRule("no-rm-rf", "deny", "rm -rf"), bashRule("warn-rm", "warn", "rm")), 1000))
	later := audit(policy("later", bashRule("allow-rm", "allow", "rm"), bashRule("audit-rm", "audit", "rm")))
	org := cluster(audit(policy("org-next", engine.Rule{ID: "noop", Effect: "warn"})))
	tiered := audit(engine.Policy{ID: "tiers", Version: 1, Evaluation: engine.EvaluationTiered, Rules: []engine.Rule{
		{ID: "low", Effect: "allow", Targets: &engine.Targets{Tools: []string{"Bash"}}},
		{ID: "high", Effect: "deny", Priority: 5, Targets: &engine.Targets{Tools: []string{"Bash"}}, Conditions: []engine.Condition{{Field: "input.command", Operator: "contains", Value: jsonText("rm")}}}}})
	frozenUntil := levelsNow.Add(time.Hour)
	decideLevelCases(t, []levelCase{
		{name: "in evaluation order, the cluster level first",
			bundle:  engine.Bundle{Policies: []engine.Policy{allowAll, later, candidate, org}},
			request: rmRequest, want: []string{`"matchedRuleId":"allow-all"`, `"shadow":[{"kind":"ClusterPolicy","policy":"org-next","decision":"allow","rule":"noop"},{"policy":"candidate","decision":"deny","rule":"no-rm-rf"},{"policy":"later","decision":"allow","rule":"audit-rm"}]`}, not: "warnings"},
		{name: "a default and a tiered verdict",
			bundle:  engine.Bundle{Policies: []engine.Policy{allowAll, defaultDeny(audit(policy("strict", bashRule("allow-curl", "allow", "curl")))), tiered}},
			request: rmRequest, want: []string{`"shadow":[{"policy":"strict","decision":"deny"},{"policy":"tiers","decision":"deny","rule":"high"}]`}},
		{name: "an Audit policy that does not compile",
			bundle:  engine.Bundle{Policies: []engine.Policy{allowAll, audit(policy("broken"))}},
			request: lsRequest, want: []string{`"shadow":[{"policy":"broken","decision":"deny"}]`}},
		{name: "with the bundle's exceptions",
			bundle:  engine.Bundle{Policies: []engine.Policy{allowAll, candidate}, Exceptions: []engine.Exception{{Name: "x", Policy: "candidate", RuleIDs: []string{"no-rm-rf"}, AgentIDs: []string{"bot"}, ExpiresAt: frozenUntil}}},
			request: rmRequest, want: []string{`"shadow":[{"policy":"candidate","decision":"allow","rule":"warn-rm"}]`}, not: "exceptionApplied"},
		{name: "only Audit policies: NO_POLICIES, with the shadow",
			bundle:  engine.Bundle{Policies: []engine.Policy{candidate}},
			request: rmRequest, want: []string{`"code":"NO_POLICIES","reason":"the bundle has no policies"`, `"shadow":[{"policy":"candidate","decision":"deny","rule":"no-rm-rf"}]`}},
		{name: "not on AGENT_FROZEN",
			bundle:  engine.Bundle{Policies: []engine.Policy{allowAll, candidate}, FrozenAgents: []engine.FrozenAgent{{ID: "bot", ExpiresAt: &frozenUntil}}},
			request: rmRequest, want: []string{`"code":"AGENT_FROZEN"`}, not: "shadow"},
		{name: "beside a two-level decision",
			bundle:  engine.Bundle{Policies: []engine.Policy{cluster(allowAll), policy("ns", bashRule("warn-rm", "warn", "rm")), candidate}},
			request: rmRequest, want: []string{`"warnings":["warned by rule \"warn-rm\" of policy \"ns\""]`, `"shadow":[{"policy":"candidate","decision":"deny","rule":"no-rm-rf"}]`}},
	})
}
