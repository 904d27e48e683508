package controllers

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/engine"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

func testPolicy(gen int64, rules int, st v1alpha1.PolicyStatus) *v1alpha1.Policy {
	p := &v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Name: "p", Generation: gen}, Status: st}
	p.Spec.Rules = make([]v1alpha1.Rule, rules)
	return p
}

func ready(t *testing.T, conds []metav1.Condition) metav1.Condition {
	t.Helper()
	for _, c := range conds {
		if c.Type == v1alpha1.ConditionReady {
			return c
		}
	}
	t.Fatal("no Ready condition")
	return metav1.Condition{}
}

// quota is terminal (someone must raise it), busy retryable.
var (
	quota = apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "toolgate-bundle", errors.New("exceeded quota: q"))
	busy  = apierrors.NewTooManyRequests("too many requests", 1)
)

func TestPolicyStatus(t *testing.T) {
	live := v1alpha1.PolicyStatus{ObservedGeneration: 1, BundleRevision: "sha256:old", RuleCount: 1,
		Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonPublished,
			ObservedGeneration: 1, LastTransitionTime: metav1.NewTime(t0.Add(-time.Hour))}}}
	diag := engine.Diagnostic{PolicyID: "p", RuleIndex: 2, RuleID: "r2", ConditionIndex: 0,
		Field: "spec.rules[2].conditions[0].value", Message: "bad pattern"}
	tests := []struct {
		name        string
		policy      *v1alpha1.Policy
		out         outcome
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantRev     string
		wantObsGen  int64
		wantRules   int32
		wantMessage string
		wantLTT     time.Time
	}{
		{"published", testPolicy(2, 3, live), outcome{configMap: "cm", revision: "sha256:new", now: t0},
			metav1.ConditionTrue, v1alpha1.ReasonPublished, "sha256:new", 2, 3, "live in ConfigMap cm", t0.Add(-time.Hour)},
		{"compile error is live and observed", testPolicy(2, 3, live),
			outcome{revision: "sha256:new", diags: map[string][]engine.Diagnostic{"p": {diag}}, now: t0},
			metav1.ConditionFalse, v1alpha1.ReasonCompileError, "sha256:new", 2, 3, `rule 2 ("r2"), condition 0`, t0},
		{"diagnostics of another policy do not count", testPolicy(2, 3, live),
			outcome{revision: "sha256:new", diags: map[string][]engine.Diagnostic{"q": {diag}}, now: t0},
			metav1.ConditionTrue, v1alpha1.ReasonPublished, "sha256:new", 2, 3, "", t0.Add(-time.Hour)},
		// Stalled: the generation is observed (kstatus reads Stalled only
		// then), what is live stays.
		{"too large keeps what is live", testPolicy(2, 3, live),
			outcome{revision: "sha256:new", tooLarge: errors.New("too big"), now: t0},
			metav1.ConditionFalse, v1alpha1.ReasonBundleTooLarge, "sha256:old", 2, 1, "too big", t0},
		{"too large wins over compile error", testPolicy(1, 1, v1alpha1.PolicyStatus{}),
			outcome{tooLarge: errors.New("too big"), diags: map[string][]engine.Diagnostic{"p": {diag}}, now: t0},
			metav1.ConditionFalse, v1alpha1.ReasonBundleTooLarge, "", 1, 0, "too big", t0},
		{"publish refused keeps what is live", testPolicy(2, 3, live),
			outcome{configMap: "cm", revision: "sha256:new", publishErr: quota, now: t0},
			metav1.ConditionFalse, v1alpha1.ReasonPublishFailed, "sha256:old", 2, 1, "could not be written to ConfigMap cm, and will not be until this is fixed (retried with backoff): " + quota.Error(), t0},
		{"publish refused wins over too large", testPolicy(2, 3, live),
			outcome{publishErr: quota, tooLarge: errors.New("too big"), now: t0},
			metav1.ConditionFalse, v1alpha1.ReasonPublishFailed, "sha256:old", 2, 1, "exceeded quota", t0},
		// Reconciling: this generation is not observed until it is live.
		{"publish retrying keeps what is live", testPolicy(2, 3, live),
			outcome{configMap: "cm", revision: "sha256:new", publishErr: busy, now: t0},
			metav1.ConditionFalse, v1alpha1.ReasonPublishFailed, "sha256:old", 1, 1, "could not be written to ConfigMap cm yet (retrying): " + busy.Error(), t0},
		{"publish retrying wins over too large", testPolicy(2, 3, live),
			outcome{publishErr: busy, tooLarge: errors.New("too big"), now: t0},
			metav1.ConditionFalse, v1alpha1.ReasonPublishFailed, "sha256:old", 1, 1, "too many requests", t0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.policy.Status.DeepCopy()
			st := policyStatus(tt.policy, tt.out)
			c := ready(t, st.Conditions)
			if c.Status != tt.wantStatus || c.Reason != tt.wantReason || !strings.Contains(c.Message, tt.wantMessage) {
				t.Errorf("Ready = %s %s %q", c.Status, c.Reason, c.Message)
			}
			if c.ObservedGeneration != tt.policy.Generation {
				t.Errorf("condition observedGeneration %d, want %d", c.ObservedGeneration, tt.policy.Generation)
			}
			if !c.LastTransitionTime.Time.Equal(tt.wantLTT) {
				t.Errorf("lastTransitionTime %s, want %s", c.LastTransitionTime, tt.wantLTT)
			}
			if st.BundleRevision != tt.wantRev || st.ObservedGeneration != tt.wantObsGen || st.RuleCount != tt.wantRules {
				t.Errorf("status %+v", st)
			}
			retrying := tt.out.publishErr == busy
			stalled := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionStalled)
			if wantStalled := tt.wantReason != v1alpha1.ReasonPublished && !retrying; wantStalled != (stalled != nil) ||
				(stalled != nil && (stalled.Status != metav1.ConditionTrue || stalled.Reason != c.Reason || stalled.Message != c.Message)) {
				t.Errorf("Stalled = %+v with Ready %s", stalled, c.Reason)
			}
			rec := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReconciling)
			if retrying != (rec != nil) || (rec != nil && (rec.Status != metav1.ConditionTrue ||
				rec.Reason != v1alpha1.ReasonPublishRetrying || rec.Message != c.Message || rec.ObservedGeneration != tt.policy.Generation)) {
				t.Errorf("Reconciling = %+v with Ready %s, retrying %v", rec, c.Reason, retrying)
			}
			if len(tt.policy.Status.Conditions) != len(before.Conditions) ||
				(len(before.Conditions) > 0 && tt.policy.Status.Conditions[0] != before.Conditions[0]) {
				t.Error("policyStatus modified its input")
			}
		})
	}
}

func TestFrozenAgentStatus(t *testing.T) {
	at := func(d time.Duration) *metav1.Time { mt := metav1.NewTime(t0.Add(d)); return &mt }
	frozen := func(exp *metav1.Time, st v1alpha1.FrozenAgentStatus) *v1alpha1.FrozenAgent {
		return &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Name: "f", Generation: 3},
			Spec: v1alpha1.FrozenAgentSpec{AgentID: "a", ExpiresAt: exp}, Status: st}
	}
	live := v1alpha1.FrozenAgentStatus{ObservedGeneration: 2, BundleRevision: "sha256:old"}
	tests := []struct {
		name       string
		f          *v1alpha1.FrozenAgent
		out        outcome
		wantReason string
		wantRev    string
		wantObsGen int64
	}{
		{"no expiry", frozen(nil, live), outcome{revision: "sha256:new", now: t0}, v1alpha1.ReasonPublished, "sha256:new", 3},
		{"expires later", frozen(at(time.Second), live), outcome{revision: "sha256:new", now: t0}, v1alpha1.ReasonPublished, "sha256:new", 3},
		{"expires now", frozen(at(0), live), outcome{revision: "sha256:new", now: t0}, v1alpha1.ReasonExpired, "", 3},
		{"expired", frozen(at(-time.Hour), live), outcome{revision: "sha256:new", now: t0}, v1alpha1.ReasonExpired, "", 3},
		{"too large", frozen(nil, live), outcome{tooLarge: errors.New("big"), now: t0}, v1alpha1.ReasonBundleTooLarge, "sha256:old", 3},
		{"expired and too large", frozen(at(-time.Hour), live), outcome{tooLarge: errors.New("big"), now: t0}, v1alpha1.ReasonExpired, "", 3},
		// Published alone after a restart: live in that revision, which
		// toolgate freeze waits for.
		{"too large, freeze alone", frozen(nil, live), outcome{tooLarge: errors.New("big"), freezeRevision: "sha256:alone", freezeAlone: true, now: t0}, v1alpha1.ReasonPublished, "sha256:alone", 3},
		{"too large, freeze on the last policies", frozen(nil, live), outcome{tooLarge: errors.New("big"), freezeRevision: "sha256:last", now: t0}, v1alpha1.ReasonPublished, "sha256:last", 3},
		{"publish refused", frozen(nil, live), outcome{revision: "sha256:new", publishErr: quota, now: t0}, v1alpha1.ReasonPublishFailed, "sha256:old", 3},
		{"publish retrying", frozen(nil, live), outcome{revision: "sha256:new", publishErr: busy, now: t0}, v1alpha1.ReasonPublishFailed, "sha256:old", 2},
		{"publish retrying, expired", frozen(at(-time.Hour), live), outcome{revision: "sha256:new", publishErr: busy, now: t0}, v1alpha1.ReasonPublishFailed, "sha256:old", 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := frozenAgentStatus(tt.f, tt.out)
			c := ready(t, st.Conditions)
			wantStatus := metav1.ConditionFalse
			if tt.wantReason == v1alpha1.ReasonPublished {
				wantStatus = metav1.ConditionTrue
			}
			if c.Reason != tt.wantReason || c.Status != wantStatus || st.BundleRevision != tt.wantRev || st.ObservedGeneration != tt.wantObsGen {
				t.Errorf("Ready %s %s, status %+v", c.Status, c.Reason, st)
			}
			retrying := tt.out.publishErr == busy
			if rec := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReconciling); retrying != (rec != nil) {
				t.Errorf("Reconciling = %+v, retrying %v", rec, retrying)
			}
			stalls := tt.wantReason == v1alpha1.ReasonBundleTooLarge || (tt.wantReason == v1alpha1.ReasonPublishFailed && !retrying)
			if s := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionStalled); stalls != (s != nil) {
				t.Errorf("Stalled = %+v, want one: %v", s, stalls)
			}
		})
	}
}

// TestFrozenAgentStatusSaysWhatIsFrozen: Ready's message names what the
// freeze stops, as engine.FrozenAgent.Describe does; a freeze of every
// agent names no agent, so the message is where `kubectl describe` says it
// freezes them all, and, published without policies, it leaves no "other
// agents" to be denied NO_POLICIES.
func TestFrozenAgentStatusSaysWhatIsFrozen(t *testing.T) {
	frozen := func(spec v1alpha1.FrozenAgentSpec) *v1alpha1.FrozenAgent {
		return &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Name: "f", Generation: 1}, Spec: spec}
	}
	all := frozen(v1alpha1.FrozenAgentSpec{AllAgents: true})
	tooLarge := errors.New("big")
	for _, tc := range []struct {
		name    string
		f       *v1alpha1.FrozenAgent
		out     outcome
		want    string
		notWant string
	}{
		{"every agent", all, outcome{configMap: "cm", revision: "sha256:new", now: t0},
			"live in ConfigMap cm: every agent of the namespace is denied every call (AGENT_FROZEN)", ""},
		{"one agent", frozen(v1alpha1.FrozenAgentSpec{AgentID: "bot"}), outcome{configMap: "cm", revision: "sha256:new", now: t0},
			`live in ConfigMap cm: agent "bot" is denied every call (AGENT_FROZEN)`, ""},
		{"a service account", frozen(v1alpha1.FrozenAgentSpec{ServiceAccount: "billing"}), outcome{configMap: "cm", revision: "sha256:new", now: t0},
			`service account "billing" is denied every call (AGENT_FROZEN)`, ""},
		{"every agent, on the last policies", all, outcome{configMap: "cm", tooLarge: tooLarge, freezeRevision: "sha256:last", now: t0},
			"every agent of the namespace is denied every call (AGENT_FROZEN)", ""},
		{"every agent, without policies", all, outcome{configMap: "cm", tooLarge: tooLarge, freezeRevision: "sha256:alone", freezeAlone: true, now: t0},
			"every agent of the namespace is denied every call (AGENT_FROZEN)", "other agents"},
		{"one agent, without policies", frozen(v1alpha1.FrozenAgentSpec{AgentID: "bot"}), outcome{configMap: "cm", tooLarge: tooLarge, freezeRevision: "sha256:alone", freezeAlone: true, now: t0},
			`other agents are denied NO_POLICIES; agent "bot" is denied every call (AGENT_FROZEN)`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ready(t, frozenAgentStatus(tc.f, tc.out).Conditions)
			if c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, tc.want) || (tc.notWant != "" && strings.Contains(c.Message, tc.notWant)) {
				t.Errorf("Ready %s %q, want %q", c.Status, c.Message, tc.want)
			}
		})
	}
}

func TestReconcilingMarksANewGeneration(t *testing.T) {
	published := withProgress(nil, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonPublished, ObservedGeneration: 1}, false)
	conds := reconciling(published, 2, t0)
	c := apimeta.FindStatusCondition(conds, v1alpha1.ConditionReconciling)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonPublishing || c.ObservedGeneration != 2 {
		t.Fatalf("Reconciling = %+v", c)
	}
	if len(published) != 1 {
		t.Error("reconciling modified its input")
	}
	if reconciling(conds, 2, t0) != nil {
		t.Error("marking the same generation twice writes again")
	}
	done := withProgress(conds, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonPublished, ObservedGeneration: 2}, false)
	if apimeta.FindStatusCondition(done, v1alpha1.ConditionReconciling) != nil {
		t.Error("Reconciling stays once the generation is published")
	}
}

// TestProgressFollowsTheFailure: a streak of failed publishes moves between
// Reconciling (retrying) and Stalled (needs a fix) as its error does, never
// both, and a publish clears both. Retries keep Reconciling's transition
// time.
func TestProgressFollowsTheFailure(t *testing.T) {
	failed := func(msg string, at time.Time) metav1.Condition {
		return metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonPublishFailed,
			Message: msg, ObservedGeneration: 2, LastTransitionTime: metav1.NewTime(at)}
	}
	only := func(conds []metav1.Condition, want, gone string) *metav1.Condition {
		t.Helper()
		c := apimeta.FindStatusCondition(conds, want)
		if c == nil || c.Status != metav1.ConditionTrue || apimeta.FindStatusCondition(conds, gone) != nil {
			t.Fatalf("want %s alone, got %+v", want, conds)
		}
		return c
	}
	conds := reconciling(nil, 2, t0)
	conds = withProgress(conds, failed("busy", t0.Add(time.Second)), true)
	if c := only(conds, v1alpha1.ConditionReconciling, v1alpha1.ConditionStalled); c.Reason != v1alpha1.ReasonPublishRetrying || c.Message != "busy" {
		t.Fatalf("Reconciling = %+v", c)
	}
	conds = withProgress(conds, failed("still busy", t0.Add(2*time.Second)), true)
	if c := only(conds, v1alpha1.ConditionReconciling, v1alpha1.ConditionStalled); c.Message != "still busy" || !c.LastTransitionTime.Time.Equal(t0) {
		t.Fatalf("a retry moved Reconciling: %+v", c)
	}
	conds = withProgress(conds, failed("forbidden", t0.Add(3*time.Second)), false)
	if c := only(conds, v1alpha1.ConditionStalled, v1alpha1.ConditionReconciling); c.Reason != v1alpha1.ReasonPublishFailed || c.Message != "forbidden" {
		t.Fatalf("Stalled = %+v", c)
	}
	conds = withProgress(conds, failed("busy again", t0.Add(4*time.Second)), true)
	only(conds, v1alpha1.ConditionReconciling, v1alpha1.ConditionStalled)
	conds = withProgress(conds, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonPublished, ObservedGeneration: 2}, false)
	if len(conds) != 1 {
		t.Fatalf("after the publish: %+v", conds)
	}
}

func TestDiagnosticsMessageIsBounded(t *testing.T) {
	var diags []engine.Diagnostic
	for i := range 500 {
		diags = append(diags, engine.Diagnostic{PolicyID: "p", RuleIndex: i, RuleID: "r", ConditionIndex: 0,
			Field: "spec.rules[0].conditions[0].value", Message: strings.Repeat("é", 40)})
	}
	msg := diagnosticsMessage(diags)
	if len(msg) > maxConditionMessage || !strings.Contains(msg, "more") || !strings.HasPrefix(msg, `policy "p", rule 0`) {
		t.Fatalf("%d bytes: %.200q", len(msg), msg)
	}
	huge := []engine.Diagnostic{{PolicyID: "p", RuleIndex: -1, ConditionIndex: -1, Message: strings.Repeat("é", 5000)}}
	if msg := diagnosticsMessage(huge); len(msg) > maxConditionMessage || !strings.HasSuffix(msg, "...") || !utf8Valid(msg) {
		t.Fatalf("one huge diagnostic: %d bytes, valid UTF-8 %v", len(msg), utf8Valid(msg))
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func TestReadyChanged(t *testing.T) {
	c := func(status metav1.ConditionStatus, reason, msg string) []metav1.Condition {
		return []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: status, Reason: reason, Message: msg}}
	}
	tests := []struct {
		name          string
		before, after []metav1.Condition
		want          bool
	}{
		{"first condition", nil, c("True", v1alpha1.ReasonPublished, ""), true},
		{"same", c("True", v1alpha1.ReasonPublished, "m"), c("True", v1alpha1.ReasonPublished, "m"), false},
		{"reason", c("False", v1alpha1.ReasonCompileError, "m"), c("False", v1alpha1.ReasonBundleTooLarge, "m"), true},
		{"message", c("False", v1alpha1.ReasonCompileError, "a"), c("False", v1alpha1.ReasonCompileError, "b"), true},
		{"status", c("True", v1alpha1.ReasonPublished, ""), c("False", v1alpha1.ReasonPublished, ""), true},
		{"none", nil, nil, false},
	}
	for _, tt := range tests {
		if got := readyChanged(tt.before, tt.after); got != tt.want {
			t.Errorf("%s: readyChanged = %v", tt.name, got)
		}
	}
}

func TestOutcomeDescribesOnlyWhatWasPublished(t *testing.T) {
	p := v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u1", Generation: 2}}
	f := v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Name: "f", UID: "u2", Generation: 1}}
	diags := []engine.Diagnostic{{PolicyID: "p", Message: "a"}, {PolicyID: "p", Message: "b"}, {PolicyID: "q"}}
	o := newOutcome(inputs{policies: []v1alpha1.Policy{p}, frozen: []v1alpha1.FrozenAgent{f}}, "cm", "sha256:1", diags, t0)
	if !o.describes(&p) || !o.describes(&f) {
		t.Fatal("the published objects are not described")
	}
	if len(o.diags["p"]) != 2 || len(o.diags["q"]) != 1 {
		t.Fatalf("diagnostics by policy: %v", o.diags)
	}
	newer := p.DeepCopy()
	newer.Generation = 3
	recreated := p.DeepCopy()
	recreated.UID = "u3"
	if o.describes(newer) || o.describes(recreated) {
		t.Fatal("an outcome describes an object changed or recreated after the publish")
	}
}

// A ClusterPolicy's compile problem is not the namespace's Policy of the
// same name's: that Policy's status stays Ready.
func TestClusterPolicyDiagnosticsStayOffTheNamesakePolicy(t *testing.T) {
	b := engine.Bundle{Policies: []engine.Policy{
		{ID: "guard", Kind: engine.KindClusterPolicy, Rules: []engine.Rule{{ID: "r", Effect: "maybe"}}},
		{ID: "guard", Rules: []engine.Rule{{ID: "r", Effect: "deny"}}},
	}}
	_, diags := engine.Compile(b)
	if len(diags) != 1 || diags[0].PolicyKind != engine.KindClusterPolicy {
		t.Fatalf("diagnostics %+v, want the ClusterPolicy's one", diags)
	}
	o := newOutcome(inputs{}, "toolgate-bundle", "sha256:x", diags, t0)
	p := testPolicy(1, 1, v1alpha1.PolicyStatus{})
	p.Name = "guard"
	st := policyStatus(p, o)
	if c := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Fatalf("the Policy's Ready: %+v", c)
	}
}

// A publish brought about by another object does not move an object's
// bundleRevision (which would write its status again); its own new
// generation, or being live again after it was not, does.
func TestBundleRevisionIsWhereTheGenerationWentLive(t *testing.T) {
	live := func(gen int64, reason string, status metav1.ConditionStatus) v1alpha1.PolicyStatus {
		return v1alpha1.PolicyStatus{ObservedGeneration: gen, BundleRevision: "sha256:old", RuleCount: 3,
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: status, Reason: reason, ObservedGeneration: gen,
				Message: "live in ConfigMap cm"}}}
	}
	next := outcome{configMap: "cm", revision: "sha256:next", now: t0}
	diags := outcome{configMap: "cm", revision: "sha256:next", now: t0,
		diags: map[string][]engine.Diagnostic{"p": {{PolicyID: "p", Message: "bad pattern"}}}}
	for _, tt := range []struct {
		name   string
		policy *v1alpha1.Policy
		out    outcome
		want   string
	}{
		{"unchanged, another object's publish", testPolicy(2, 3, live(2, v1alpha1.ReasonPublished, metav1.ConditionTrue)), next, "sha256:old"},
		{"unchanged, still failing to compile", testPolicy(2, 3, live(2, v1alpha1.ReasonCompileError, metav1.ConditionFalse)), diags, "sha256:old"},
		{"new generation", testPolicy(3, 3, live(2, v1alpha1.ReasonPublished, metav1.ConditionTrue)), next, "sha256:next"},
		{"live again after too large", testPolicy(2, 3, live(2, v1alpha1.ReasonBundleTooLarge, metav1.ConditionFalse)), next, "sha256:next"},
		{"live again after a refused write", testPolicy(2, 3, live(2, v1alpha1.ReasonPublishFailed, metav1.ConditionFalse)), next, "sha256:next"},
		{"never published", testPolicy(1, 3, v1alpha1.PolicyStatus{}), next, "sha256:next"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			st := policyStatus(tt.policy, tt.out)
			if st.BundleRevision != tt.want {
				t.Fatalf("bundleRevision %q, want %q", st.BundleRevision, tt.want)
			}
			if tt.want == "sha256:old" && tt.out.diags == nil && !equality.Semantic.DeepEqual(st, tt.policy.Status) {
				t.Errorf("an unchanged object's status changed: %+v -> %+v", tt.policy.Status, st)
			}
		})
	}
}

// A Policy with no status yet is not marked Reconciling before its first
// publish: its first write is Ready.
func TestReconcilingLeavesANewObjectAlone(t *testing.T) {
	if conds := reconcilingMark(nil, 1, t0); conds != nil {
		t.Fatalf("a new object is marked %+v", conds)
	}
	published := withProgress(nil, metav1.Condition{Type: v1alpha1.ConditionReady, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonPublished, ObservedGeneration: 1}, false)
	if conds := reconcilingMark(published, 2, t0); apimeta.FindStatusCondition(conds, v1alpha1.ConditionReconciling) == nil {
		t.Fatalf("a published object's new generation is not marked: %+v", conds)
	}
}
