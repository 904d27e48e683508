package engine

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

var levelsNow = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func clusterPolicy(p Policy) Policy { p.Kind = KindClusterPolicy; return p }
func auditPolicy(p Policy) Policy   { p.Mode = ModeAudit; return p }

func bashRule(id, effect, contains string) Rule {
	return Rule{ID: id, Effect: effect, Conditions: []Condition{
		cond("tool_name", "eq", "Bash"), cond("input.command", "contains", contains)}}
}

func evalAt(t *testing.T, b Bundle, req Request, sa string, now time.Time) Result {
	t.Helper()
	c, diags := Compile(b)
	if len(diags) > 0 {
		t.Fatalf("diagnostics: %v", diags)
	}
	return c.Evaluate(req, EvalOptions{Now: fixedClock(now), ServiceAccount: sa})
}

var rmRequest = Request{"tool_name": "Bash", "agent_id": "bot", "input": map[string]any{"command": "rm -rf /"}}

// A namespace's allow cannot loosen a ClusterPolicy's deny, whatever the
// priorities: the namespace policy here outranks the cluster's.
func TestClusterDenyNotLoosenedByNamespaceAllow(t *testing.T) {
	b := Bundle{Policies: []Policy{
		clusterPolicy(ordered("org-guardrails", bashRule("no-rm-rf", "deny", "rm -rf"))),
		{ID: "team", Version: 1, Priority: 100, Rules: []Rule{bashRule("allow-bash", "allow", "")}},
	}}
	r := evalAt(t, b, rmRequest, "", levelsNow)
	if r.Decision != Deny || r.MatchedPolicyID != "org-guardrails" || r.MatchedRuleID != "no-rm-rf" || r.MatchedPolicyKind != KindClusterPolicy {
		t.Fatalf("got %+v, want deny by ClusterPolicy org-guardrails rule no-rm-rf", r)
	}
	// A cluster default deny is not loosened either.
	b.Policies[0].DefaultEffect = "deny"
	r = evalAt(t, b, Request{"tool_name": "Bash", "agent_id": "bot", "input": map[string]any{"command": "ls"}}, "", levelsNow)
	if r.Decision != Deny || r.MatchedPolicyKind != KindClusterPolicy || !strings.Contains(r.Reason, "org-guardrails") {
		t.Fatalf("got %+v, want the cluster's default deny", r)
	}
}

// The reverse: a namespace deny tightens a ClusterPolicy's allow.
func TestNamespaceDenyTightensClusterAllow(t *testing.T) {
	b := Bundle{Policies: []Policy{
		clusterPolicy(Policy{ID: "org", Version: 1, Priority: 100, Rules: []Rule{bashRule("allow-bash", "allow", "")}}),
		ordered("team", bashRule("no-rm", "deny", "rm ")),
	}}
	r := evalAt(t, b, rmRequest, "", levelsNow)
	if r.Decision != Deny || r.MatchedPolicyID != "team" || r.MatchedPolicyKind != KindPolicy {
		t.Fatalf("got %+v, want deny by Policy team", r)
	}
	// The stronger non-deny effect wins across levels: a cluster warn over
	// a namespace allow; equal effects go to the namespace.
	b.Policies[0].Rules[0].Effect = "warn"
	b.Policies[1].Rules[0] = bashRule("allow-rm", "allow", "rm ")
	r = evalAt(t, b, rmRequest, "", levelsNow)
	if r.Decision != Allow || r.Effect != EffectWarn || r.MatchedPolicyID != "org" || r.MatchedPolicyKind != KindClusterPolicy {
		t.Fatalf("got %+v, want warn by ClusterPolicy org", r)
	}
	b.Policies[0].Rules[0].Effect = "allow"
	r = evalAt(t, b, rmRequest, "", levelsNow)
	if r.Effect != EffectAllow || r.MatchedPolicyID != "team" || r.MatchedPolicyKind != KindPolicy {
		t.Fatalf("got %+v, want the tie to the namespace's allow", r)
	}
}

// A namespace without Policies is decided by the ClusterPolicies alone; a
// bundle without ClusterPolicies names no level, as before.
func TestLevelAlone(t *testing.T) {
	b := Bundle{Policies: []Policy{clusterPolicy(ordered("org", bashRule("no-rm-rf", "deny", "rm -rf")))}}
	if r := evalAt(t, b, rmRequest, "", levelsNow); r.Decision != Deny || r.MatchedPolicyKind != KindClusterPolicy {
		t.Fatalf("cluster level alone: %+v", r)
	}
	if r := evalAt(t, b, Request{"tool_name": "Read"}, "", levelsNow); r.Decision != Allow || r.MatchedPolicyKind != KindClusterPolicy {
		t.Fatalf("cluster level alone, default allow: %+v", r)
	}
	b.Policies[0].Kind = ""
	r := evalAt(t, b, rmRequest, "", levelsNow)
	doc, _ := json.Marshal(r)
	if r.MatchedPolicyKind != "" || strings.Contains(string(doc), "matchedPolicyKind") {
		t.Fatalf("one level: %s", doc)
	}
}

// An exception exempts its agents (by id, folded as freezes fold, or by
// the caller's ServiceAccount) from its rules until it expires, on the
// evaluator's clock, and says so on the decision it changed.
func TestExceptionAppliesThenExpires(t *testing.T) {
	expires := levelsNow.Add(time.Hour)
	b := Bundle{
		Policies:   []Policy{ordered("team", bashRule("no-rm-rf", "deny", "rm -rf"))},
		Exceptions: []Exception{{Name: "migration", Policy: "team", RuleIDs: []string{"no-rm-rf"}, AgentIDs: []string{"BOT"}, ServiceAccounts: []string{"cleaner"}, ExpiresAt: expires}},
	}
	if r := evalAt(t, b, rmRequest, "", levelsNow); r.Decision != Allow || r.ExceptionApplied != "migration" {
		t.Fatalf("in force, by agent id: %+v", r)
	}
	other := Request{"tool_name": "Bash", "agent_id": "someone", "input": map[string]any{"command": "rm -rf /"}}
	if r := evalAt(t, b, other, "cleaner", levelsNow); r.Decision != Allow || r.ExceptionApplied != "migration" {
		t.Fatalf("in force, by service account: %+v", r)
	}
	if r := evalAt(t, b, other, "", levelsNow); r.Decision != Deny || r.ExceptionApplied != "" {
		t.Fatalf("another agent: %+v", r)
	}
	if r := evalAt(t, b, rmRequest, "", expires); r.Decision != Deny || r.ExceptionApplied != "" || r.MatchedRuleID != "no-rm-rf" {
		t.Fatalf("at expiresAt the exception has ended: %+v", r)
	}
	// An exception that changes which rule decides is named, though the
	// decision stays deny; one that changes nothing is not.
	b.Policies[0].Rules = append(b.Policies[0].Rules, bashRule("no-rm", "deny", "rm "))
	if r := evalAt(t, b, rmRequest, "", levelsNow); r.Decision != Deny || r.MatchedRuleID != "no-rm" || r.ExceptionApplied != "migration" {
		t.Fatalf("exempted rule followed by another deny: %+v", r)
	}
	b.Policies[0].Rules = []Rule{bashRule("no-rm", "deny", "rm "), bashRule("no-rm-rf", "deny", "rm -rf")}
	if r := evalAt(t, b, rmRequest, "", levelsNow); r.Decision != Deny || r.MatchedRuleID != "no-rm" || r.ExceptionApplied != "" {
		t.Fatalf("an exempted rule after the deciding one: %+v", r)
	}
	b.Policies[0].Rules = []Rule{bashRule("no-rm-rf", "deny", "rm -rf"), bashRule("no-rm", "deny", "rm ")}
	// The trace shows the exempted rule as not matching, for the exception.
	c := mustCompile(t, b)
	r := c.Evaluate(rmRequest, EvalOptions{Now: fixedClock(levelsNow), Explain: true})
	if len(r.Trace) == 0 || r.Trace[0].RuleID != "no-rm-rf" || r.Trace[0].Matched || r.Trace[0].Exception != "migration" {
		t.Fatalf("trace: %+v", r.Trace)
	}
}

// An exception names its policy's kind: one for a ClusterPolicy does not
// exempt from a namespace Policy of the same name, and the reverse.
func TestExceptionNamesItsKind(t *testing.T) {
	b := Bundle{
		Policies: []Policy{clusterPolicy(ordered("guard", bashRule("no-rm-rf", "deny", "rm -rf"))),
			ordered("guard", bashRule("no-rm-rf", "deny", "rm -rf"))},
		Exceptions: []Exception{{Name: "x", Policy: "guard", RuleIDs: []string{"no-rm-rf"}, AgentIDs: []string{"bot"}, ExpiresAt: levelsNow.Add(time.Hour)}},
	}
	if r := evalAt(t, b, rmRequest, "", levelsNow); r.Decision != Deny || r.MatchedPolicyKind != KindClusterPolicy || r.ExceptionApplied != "" {
		t.Fatalf("a Policy's exception exempts from the ClusterPolicy: %+v", r)
	}
	b.Exceptions[0].PolicyKind = KindClusterPolicy
	if r := evalAt(t, b, rmRequest, "", levelsNow); r.Decision != Deny || r.MatchedPolicyKind != KindPolicy || r.ExceptionApplied != "x" {
		t.Fatalf("the ClusterPolicy's exception: %+v", r)
	}
}

// An Audit policy never changes a decision; what it would have decided on
// its own is recorded beside it.
func TestAuditPolicyChangesNoDecision(t *testing.T) {
	enforcing := ordered("team", Rule{ID: "allow-all", Effect: "allow"})
	shadow := auditPolicy(Policy{ID: "candidate", Version: 1, Priority: 1000, Rules: []Rule{bashRule("no-rm-rf", "deny", "rm -rf")}})
	with := Bundle{Policies: []Policy{enforcing, shadow, clusterPolicy(auditPolicy(ordered("org-next", Rule{ID: "noop", Effect: "allow"})))}}
	without := Bundle{Policies: []Policy{enforcing}}
	for _, req := range []Request{rmRequest, {"tool_name": "Read"}, {}} {
		got, want := evalAt(t, with, req, "", levelsNow), evalAt(t, without, req, "", levelsNow)
		got.LatencyMs, want.LatencyMs, got.Shadow = 0, 0, nil
		gotDoc, _ := json.Marshal(got)
		wantDoc, _ := json.Marshal(want)
		if string(gotDoc) != string(wantDoc) {
			t.Fatalf("an Audit policy changed the decision of %v:\n with %s\n without %s", req, gotDoc, wantDoc)
		}
	}
	r := evalAt(t, with, rmRequest, "", levelsNow)
	want := []ShadowVerdict{{Kind: KindClusterPolicy, Policy: "org-next", Decision: Allow, Rule: "noop"}, {Policy: "candidate", Decision: Deny, Rule: "no-rm-rf"}}
	if !slices.Equal(r.Shadow, want) {
		t.Fatalf("shadow %+v, want %+v", r.Shadow, want)
	}
	doc, _ := json.Marshal(r)
	if !strings.Contains(string(doc), `"shadow":[{"kind":"ClusterPolicy","policy":"org-next","decision":"allow","rule":"noop"},{"policy":"candidate","decision":"deny","rule":"no-rm-rf"}]`) {
		t.Fatalf("answer: %s", doc)
	}
	// Only Audit policies: no policy decides, so NO_POLICIES, and still the
	// shadow says what they would have decided.
	r = evalAt(t, Bundle{Policies: []Policy{shadow}}, rmRequest, "", levelsNow)
	if r.Code != CodeNoPolicies || len(r.Shadow) != 1 || r.Shadow[0].Decision != Deny {
		t.Fatalf("only audit policies: %+v", r)
	}
}

// A bundle using levels is schema version 4; it round-trips, and a kind or
// mode the engine does not know is a compile error, never read as another.
func TestLevelsBundleSchema(t *testing.T) {
	b := Bundle{Policies: []Policy{clusterPolicy(ordered("org", bashRule("no-rm-rf", "deny", "rm -rf")))},
		Exceptions:      []Exception{{Name: "x", PolicyKind: KindClusterPolicy, Policy: "org", RuleIDs: []string{"no-rm-rf"}, AgentIDs: []string{"bot"}, ExpiresAt: levelsNow}},
		NamespaceLabels: map[string]string{"team": "payments"}}
	doc, _, err := Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Decode(doc)
	if err != nil || back.SchemaVersion != SchemaVersionLevels || back.NamespaceLabels["team"] != "payments" || len(back.Exceptions) != 1 {
		t.Fatalf("round trip: %+v %v", back, err)
	}
	older := strings.Replace(string(doc), `"schemaVersion":4`, `"schemaVersion":3`, 1)
	if _, err := Decode([]byte(older)); err == nil || !strings.Contains(err.Error(), "needs 4") {
		t.Fatalf("a version 3 document holding a ClusterPolicy: %v", err)
	}
	for _, p := range []Policy{{ID: "p", Kind: "Namespace", Rules: []Rule{{ID: "r", Effect: "deny"}}}, {ID: "p", Mode: "DryRun", Rules: []Rule{{ID: "r", Effect: "deny"}}}} {
		c, diags := Compile(Bundle{Policies: []Policy{p}})
		if len(diags) == 0 {
			t.Fatalf("%+v compiled", p)
		}
		if r := c.Evaluate(Request{}, EvalOptions{}); r.Code != CodePolicyCompileError {
			t.Fatalf("%+v: %+v", p, r)
		}
	}
}
