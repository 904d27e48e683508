package regodiff

import (
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
)

// TestRegoAsk: the ask effect, case by case. An ask decides unless a deny
// does: in ordered evaluation the first matching ask, which no later
// allow, warn or audit (in its policy or a later one) replaces; in tiered
// evaluation and between levels deny > ask > warn > audit > allow. OPA's
// answer is the engine's (decision and effect ask, code
// APPROVAL_REQUIRED, the rule's description or a sentence as reason),
// plus approvalTimeoutSeconds, which compare holds to the engine's
// ApprovalTimeout.
func TestRegoAsk(t *testing.T) {
	const pay = `{"tool_name":"pay","agent_id":"bot","kwargs":{"amount":5000}}`
	payRule := func(id, effect string) engine.Rule {
		return engine.Rule{ID: id, Effect: effect, Conditions: []engine.Condition{{Field: "tool_name", Operator: "eq", Value: jsonText("pay")}}}
	}
	described := payRule("ask-pay", "ask")
	described.Description = "payments over 1000 need a person"
	described.Approval = &engine.RuleApproval{Timeout: "90s"}
	scoped := payRule("ask-bot", "ask")
	scoped.Subjects = &engine.Subjects{Agents: []string{"BOT"}}
	tiered := func(id string, rules ...engine.Rule) engine.Policy {
		p := policy(id, rules...)
		p.Evaluation = engine.EvaluationTiered
		return p
	}
	onOrders := func(r engine.Rule) engine.Rule {
		r.Targets = &engine.Targets{Resources: []engine.ResourceTarget{{Type: "table", Names: []string{"orders"}}}}
		return r
	}
	const payOrders = `{"tool_name":"pay","agent_id":"bot","resources":[{"type":"table","name":"orders"}]}`
	frozenUntil := levelsNow.Add(time.Hour)
	askReason := `"reason":"approval required by rule \"ask-pay\" of policy \"p\""`
	decideLevelCases(t, []levelCase{
		{name: "ordered: ask then allow, the ask decides",
			bundle:  engine.Bundle{Policies: []engine.Policy{policy("p", payRule("ask-pay", "ask"), payRule("allow-pay", "allow"))}},
			request: pay, timeout: 5 * time.Minute,
			want: []string{`{"decision":"ask","effect":"ask","matchedPolicyId":"p","matchedPolicyVersion":1,"matchedRuleId":"ask-pay","code":"APPROVAL_REQUIRED",` + askReason}},
		{name: "ordered: allow then ask, the ask decides",
			bundle:  engine.Bundle{Policies: []engine.Policy{policy("p", payRule("allow-pay", "allow"), payRule("ask-pay", "ask"))}},
			request: pay, want: []string{`"decision":"ask"`, `"matchedRuleId":"ask-pay"`}},
		{name: "ordered: the first of two asks decides",
			bundle:  engine.Bundle{Policies: []engine.Policy{policy("p", payRule("ask-pay", "ask"), payRule("ask-again", "ask"))}},
			request: pay, want: []string{`"matchedRuleId":"ask-pay"`}},
		{name: "ordered: a later policy's allow does not replace the ask",
			bundle:  engine.Bundle{Policies: []engine.Policy{policy("p", payRule("ask-pay", "ask")), prio(policy("later", payRule("allow-pay", "allow")), -1)}},
			request: pay, want: []string{`"decision":"ask","effect":"ask","matchedPolicyId":"p"`}},
		{name: "ordered: a later policy's ask does not replace the first",
			bundle:  engine.Bundle{Policies: []engine.Policy{policy("p", payRule("ask-pay", "ask")), prio(policy("later", payRule("ask-later", "ask")), -1)}},
			request: pay, want: []string{`"matchedPolicyId":"p","matchedPolicyVersion":1,"matchedRuleId":"ask-pay"`}},
		{name: "ordered: a warn after the ask still warns",
			bundle:  engine.Bundle{Policies: []engine.Policy{policy("p", payRule("ask-pay", "ask"), payRule("warn-pay", "warn")), prio(policy("later", payRule("warn-later", "warn")), -1)}},
			request: pay, want: []string{`"matchedRuleId":"ask-pay"`, `"warnings":["warned by rule \"warn-pay\" of policy \"p\"","warned by rule \"warn-later\" of policy \"later\""]`}},
		{name: "ordered: ask then a deny in its policy, the deny decides",
			bundle:  engine.Bundle{Policies: []engine.Policy{policy("p", payRule("ask-pay", "ask"), payRule("no-pay", "deny"))}},
			request: pay, want: []string{`"decision":"deny","effect":"deny","matchedPolicyId":"p","matchedPolicyVersion":1,"matchedRuleId":"no-pay","code":"no-pay"`}, not: "approvalTimeout"},
		{name: "ordered: ask then a later policy's deny, the deny decides",
			bundle:  engine.Bundle{Policies: []engine.Policy{policy("p", payRule("ask-pay", "ask")), prio(policy("later", payRule("no-pay", "deny")), -1)}},
			request: pay, want: []string{`"decision":"deny","effect":"deny","matchedPolicyId":"later"`}},
		{name: "the rule's description and approval.timeout",
			bundle:  engine.Bundle{Policies: []engine.Policy{policy("p", described)}},
			request: pay, timeout: 90 * time.Second,
			want: []string{`"code":"APPROVAL_REQUIRED","reason":"payments over 1000 need a person"`}},
		{name: "tiered: ask over warn in one tier",
			bundle:  engine.Bundle{Policies: []engine.Policy{tiered("p", payRule("warn-pay", "warn"), payRule("ask-pay", "ask"))}},
			request: pay, want: []string{`"decision":"ask","effect":"ask","matchedPolicyId":"p","matchedPolicyVersion":1,"matchedRuleId":"ask-pay","code":"APPROVAL_REQUIRED"`}, not: "warnings"},
		{name: "tiered: deny over ask in one tier",
			bundle:  engine.Bundle{Policies: []engine.Policy{tiered("p", payRule("ask-pay", "ask"), payRule("no-pay", "deny"))}},
			request: pay, want: []string{`"decision":"deny","effect":"deny","matchedPolicyId":"p","matchedPolicyVersion":1,"matchedRuleId":"no-pay"`}},
		{name: "tiered: a higher tier's allow over the ask",
			bundle: engine.Bundle{Policies: []engine.Policy{tiered("p", payRule("ask-pay", "ask"), func() engine.Rule {
				r := payRule("allow-pay", "allow")
				r.Priority = 10
				return r
			}())}},
			request: pay, want: []string{`"decision":"allow","effect":"allow","matchedPolicyId":"p","matchedPolicyVersion":1,"matchedRuleId":"allow-pay"`}},
		{name: "tiered: an ask for a resource over the call's warn, which still warns",
			bundle:  engine.Bundle{Policies: []engine.Policy{tiered("p", payRule("warn-pay", "warn"), onOrders(payRule("ask-orders", "ask")))}},
			request: payOrders, timeout: 5 * time.Minute,
			want: []string{`"matchedRuleId":"ask-orders","matchedResource":{"type":"table","name":"orders"},"code":"APPROVAL_REQUIRED"`, `"warnings":["warned by rule \"warn-pay\" of policy \"p\""]`}},
		{name: "tiered: an earlier policy's ask is not replaced by a later tiered allow",
			bundle:  engine.Bundle{Policies: []engine.Policy{tiered("p", payRule("ask-pay", "ask")), prio(tiered("later", payRule("allow-pay", "allow")), -1)}},
			request: pay, want: []string{`"decision":"ask","effect":"ask","matchedPolicyId":"p"`}},
		{name: "levels: a cluster ask over a namespace allow",
			bundle:  engine.Bundle{Policies: []engine.Policy{cluster(policy("org", payRule("ask-pay", "ask"))), prio(policy("team", payRule("allow-pay", "allow")), 100)}},
			request: pay, want: []string{`"decision":"ask","effect":"ask","matchedPolicyId":"org","matchedPolicyVersion":1,"matchedRuleId":"ask-pay","matchedPolicyKind":"ClusterPolicy","code":"APPROVAL_REQUIRED"`}},
		{name: "levels: a namespace ask over a cluster warn",
			bundle:  engine.Bundle{Policies: []engine.Policy{cluster(policy("org", payRule("warn-pay", "warn"))), policy("team", payRule("ask-pay", "ask"))}},
			request: pay, want: []string{`"decision":"ask","effect":"ask","matchedPolicyId":"team","matchedPolicyVersion":1,"matchedRuleId":"ask-pay","matchedPolicyKind":"Policy"`, `"warnings":["warned by rule \"warn-pay\" of policy \"org\""]`}},
		{name: "levels: a namespace deny over a cluster ask",
			bundle:  engine.Bundle{Policies: []engine.Policy{cluster(policy("org", payRule("ask-pay", "ask"))), policy("team", payRule("no-pay", "deny"))}},
			request: pay, want: []string{`"decision":"deny","effect":"deny","matchedPolicyId":"team","matchedPolicyVersion":1,"matchedRuleId":"no-pay","matchedPolicyKind":"Policy"`}},
		{name: "levels: asks on both levels, a tie to the namespace",
			bundle: engine.Bundle{Policies: []engine.Policy{cluster(policy("org", payRule("ask-org", "ask"))),
				policy("team", payRule("allow-pay", "allow"), payRule("ask-team", "ask")), prio(policy("later", payRule("ask-later", "ask")), -1)}},
			request: pay, want: []string{`"matchedPolicyId":"team","matchedPolicyVersion":1,"matchedRuleId":"ask-team","matchedPolicyKind":"Policy"`}},
		{name: "levels: the cluster's first asking policy, not its last verdict",
			bundle:  engine.Bundle{Policies: []engine.Policy{cluster(policy("org", payRule("ask-pay", "ask"))), cluster(prio(policy("org-later", payRule("audit-pay", "audit")), -1)), policy("team", payRule("allow-pay", "allow"))}},
			request: pay, want: []string{`"matchedPolicyId":"org","matchedPolicyVersion":1,"matchedRuleId":"ask-pay","matchedPolicyKind":"ClusterPolicy"`}},
		{name: "levels: of two asking ClusterPolicies, the first",
			bundle: engine.Bundle{Policies: []engine.Policy{cluster(policy("org", payRule("ask-pay", "ask"))), cluster(prio(policy("org-later", payRule("ask-later", "ask")), -1)),
				policy("team", payRule("allow-pay", "allow"))}},
			request: pay, want: []string{`"matchedPolicyId":"org","matchedPolicyVersion":1,"matchedRuleId":"ask-pay","matchedPolicyKind":"ClusterPolicy"`}},
		{name: "subjects: an ask scoped to an agent holds without agent_id",
			bundle:  engine.Bundle{Policies: []engine.Policy{policy("p", scoped)}},
			request: `{"tool_name":"pay"}`, want: []string{`"decision":"ask","effect":"ask","matchedPolicyId":"p","matchedPolicyVersion":1,"matchedRuleId":"ask-bot"`}},
		{name: "subjects: ... and the agent folded, but not another agent",
			bundle:  engine.Bundle{Policies: []engine.Policy{policy("p", scoped)}},
			request: `{"tool_name":"pay","agent_id":"other"}`, want: []string{`"decision":"allow"`}, not: "ask"},
		{name: "a frozen agent is denied, never asked",
			bundle:  engine.Bundle{Policies: []engine.Policy{policy("p", payRule("ask-pay", "ask"))}, FrozenAgents: []engine.FrozenAgent{{ID: "bot", ExpiresAt: &frozenUntil}}},
			request: pay, want: []string{`"code":"AGENT_FROZEN"`}, not: "APPROVAL_REQUIRED"},
		{name: "an exception lifts the ask",
			bundle: engine.Bundle{Policies: []engine.Policy{policy("p", payRule("ask-pay", "ask"))},
				Exceptions: []engine.Exception{{Name: "x", Policy: "p", RuleIDs: []string{"ask-pay"}, AgentIDs: []string{"bot"}, ExpiresAt: frozenUntil}}},
			request: pay, want: []string{`"decision":"allow"`, `"exceptionApplied":"x"`}},
		{name: "an Audit policy's ask is a shadow verdict ask, never the decision",
			bundle: engine.Bundle{Policies: []engine.Policy{policy("team", payRule("allow-pay", "allow")),
				audit(policy("candidate", payRule("allow-pay", "allow"), payRule("ask-pay", "ask"))), audit(tiered("tiers", payRule("ask-pay", "ask")))}},
			request: pay, want: []string{`"decision":"allow"`, `"shadow":[{"policy":"candidate","decision":"ask","rule":"ask-pay"},{"policy":"tiers","decision":"ask","rule":"ask-pay"}]`}},
	})
}
