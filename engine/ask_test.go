package engine

import (
	"strings"
	"testing"
	"time"
)

func payRule(id, effect string) Rule {
	return Rule{ID: id, Effect: effect, Conditions: []Condition{cond("tool_name", "eq", "pay")}}
}

var payRequest = Request{"tool_name": "pay", "agent_id": "bot", "kwargs": map[string]any{"amount": 5000.0}}

func wantAsk(t *testing.T, r Result, policy, rule string) {
	t.Helper()
	if r.Decision != Ask || r.Effect != EffectAsk || r.Code != CodeApprovalRequired || r.MatchedPolicyID != policy || r.MatchedRuleID != rule {
		t.Fatalf("got %+v, want ask APPROVAL_REQUIRED by %s/%s", r, policy, rule)
	}
}

// Tiered: deny > ask > warn > audit > allow within a tier.
func TestAskRanksBelowDenyAboveWarn(t *testing.T) {
	ask := payRule("ask", "ask")
	for _, other := range []string{"allow", "audit", "warn"} {
		r := evalAt(t, Bundle{Policies: []Policy{tiered("p", payRule(other, other), ask)}}, payRequest, "", levelsNow)
		wantAsk(t, r, "p", "ask")
	}
	r := evalAt(t, Bundle{Policies: []Policy{tiered("p", ask, payRule("deny", "deny"))}}, payRequest, "", levelsNow)
	if r.Decision != Deny || r.MatchedRuleID != "deny" {
		t.Fatalf("got %+v, want the deny over the ask", r)
	}
	// A higher tier still decides first.
	high := payRule("allow", "allow")
	high.Priority = 10
	r = evalAt(t, Bundle{Policies: []Policy{tiered("p", ask, high)}}, payRequest, "", levelsNow)
	if r.Decision != Allow || r.MatchedRuleID != "allow" {
		t.Fatalf("got %+v, want the higher tier's allow", r)
	}
}

// Ordered: a matching ask decides unless a deny does, wherever the deny is,
// and no later allow (in its policy or a later one) replaces it.
func TestOrderedAskDecidesUnlessADenyDoes(t *testing.T) {
	later := Policy{ID: "later", Version: 1, Priority: -1, Rules: []Rule{payRule("allow-pay", "allow")}}
	b := Bundle{Policies: []Policy{ordered("p", payRule("ask-pay", "ask"), payRule("allow-all", "allow")), later}}
	wantAsk(t, evalAt(t, b, payRequest, "", levelsNow), "p", "ask-pay")

	b.Policies[1].Rules = append(b.Policies[1].Rules, payRule("no-pay", "deny"))
	r := evalAt(t, b, payRequest, "", levelsNow)
	if r.Decision != Deny || r.MatchedRuleID != "no-pay" {
		t.Fatalf("got %+v, want the later policy's deny over the ask", r)
	}
	// The first ask reached is the one that decides.
	b = Bundle{Policies: []Policy{ordered("p", payRule("first", "ask"), payRule("second", "ask"))}}
	wantAsk(t, evalAt(t, b, payRequest, "", levelsNow), "p", "first")
}

// Levels: the most restrictive wins, so a namespace cannot turn a
// cluster's ask into an allow, and a deny of either level beats an ask.
func TestAskAcrossLevels(t *testing.T) {
	b := Bundle{Policies: []Policy{
		clusterPolicy(ordered("org", payRule("ask-pay", "ask"))),
		ordered("team", payRule("allow-pay", "allow")),
	}}
	r := evalAt(t, b, payRequest, "", levelsNow)
	wantAsk(t, r, "org", "ask-pay")
	if r.MatchedPolicyKind != KindClusterPolicy {
		t.Fatalf("kind %q, want ClusterPolicy", r.MatchedPolicyKind)
	}
	b.Policies[1].Rules[0].Effect = "deny"
	if r := evalAt(t, b, payRequest, "", levelsNow); r.Decision != Deny || r.MatchedPolicyID != "team" {
		t.Fatalf("got %+v, want the namespace's deny", r)
	}
}

// A frozen agent is denied, never asked.
func TestFrozenAgentIsDeniedNotAsked(t *testing.T) {
	b := Bundle{Policies: []Policy{ordered("p", payRule("ask-pay", "ask"))}, FrozenAgents: []FrozenAgent{{ID: "bot"}}}
	if r := evalAt(t, b, payRequest, "", levelsNow); r.Decision != Deny || r.Code != CodeAgentFrozen {
		t.Fatalf("got %+v, want AGENT_FROZEN", r)
	}
}

// An ask scoped to an agent holds when the agent id is missing, as a
// scoped deny does: missing identity never skips an approval.
func TestAskScopedToAnAgentHoldsWithoutIdentity(t *testing.T) {
	r := payRule("ask-bot", "ask")
	r.Subjects = &Subjects{Agents: []string{"bot"}}
	res := evalAt(t, Bundle{Policies: []Policy{ordered("p", r)}}, Request{"tool_name": "pay"}, "", levelsNow)
	wantAsk(t, res, "p", "ask-bot")
	res = evalAt(t, Bundle{Policies: []Policy{ordered("p", r)}}, Request{"tool_name": "pay", "agent_id": "other"}, "", levelsNow)
	if res.Decision != Allow {
		t.Fatalf("got %+v, want allow for another agent", res)
	}
}

func TestAskTimeoutAndItsErrors(t *testing.T) {
	r := payRule("ask-pay", "ask")
	res := evalAt(t, Bundle{Policies: []Policy{ordered("p", r)}}, payRequest, "", levelsNow)
	if res.ApprovalTimeout != 5*time.Minute {
		t.Fatalf("default timeout %v, want 5m", res.ApprovalTimeout)
	}
	if !strings.Contains(res.Reason, "approval required by rule") {
		t.Fatalf("reason %q", res.Reason)
	}
	r.Approval = &RuleApproval{Timeout: "90s"}
	r.Description = "payments over 1000 need a person"
	res = evalAt(t, Bundle{Policies: []Policy{ordered("p", r)}}, payRequest, "", levelsNow)
	if res.ApprovalTimeout != 90*time.Second || res.Reason != r.Description {
		t.Fatalf("got %+v, want a 90s ask with the description as reason", res)
	}
	for _, tc := range []struct {
		effect, timeout, want string
	}{
		{"ask", "soon", "not a Go duration"},
		{"ask", "0s", "must be positive"},
		{"ask", "-5m", "must be positive"},
		{"ask", "2h", "longer than the 1h0m0s maximum"},
		{"deny", "", "only meaningful on an ask rule"},
	} {
		bad := payRule("r", tc.effect)
		bad.Approval = &RuleApproval{Timeout: tc.timeout}
		_, diags := Compile(Bundle{Policies: []Policy{ordered("p", bad)}})
		if len(diags) != 1 || !strings.Contains(diags[0].Message, tc.want) || !strings.HasSuffix(diags[0].Location.String(), "approval.timeout") && tc.effect == "ask" {
			t.Errorf("%s %q: diagnostics %v, want one mentioning %q at approval.timeout", tc.effect, tc.timeout, diags, tc.want)
		}
	}
}

// A bundle with an ask rule is written as version 5: an older sidecar
// refuses it and keeps its last bundle rather than fail on the effect.
func TestAskBundleSchemaVersion(t *testing.T) {
	b := Bundle{Policies: []Policy{ordered("p", payRule("allow-pay", "allow"))}}
	if v := b.NeededSchemaVersion(); v != SchemaVersionOrdered {
		t.Fatalf("version %d without ask", v)
	}
	b.Policies[0].Rules[0].Effect = "ask"
	if v := b.NeededSchemaVersion(); v != SchemaVersionAsk {
		t.Fatalf("version %d with ask, want %d", v, SchemaVersionAsk)
	}
}

// The answer names the ApprovalRequest (set by the sidecar) in RFC 3339,
// and reads back.
func TestAskResultJSON(t *testing.T) {
	res := evalAt(t, Bundle{Policies: []Policy{ordered("p", payRule("ask-pay", "ask"))}}, payRequest, "", levelsNow)
	res.Approval = &ApprovalRef{Name: "pay-x7k2", Namespace: "agents", ExpiresAt: levelsNow.Add(5 * time.Minute)}
	b, err := res.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"decision":"ask"`, `"effect":"ask"`, `"code":"APPROVAL_REQUIRED"`,
		`"approval":{"name":"pay-x7k2","namespace":"agents","expiresAt":"2026-12-01T10:05:00Z"}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
	var back Result
	if err := back.UnmarshalJSON(b); err != nil || back.Decision != Ask || back.Approval == nil || back.Approval.Name != "pay-x7k2" {
		t.Fatalf("read back %+v, %v", back, err)
	}
}
