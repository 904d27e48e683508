package controllers_test

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
)

// Without the webhook, a pattern RE2 rejects reaches the controller: it must
// stay in the bundle so sidecars fail closed on it.
func TestCompileErrorPolicyFailsClosed(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-")
	startManager(t, controllers.Options{}, ns)
	create(t, policy(ns, "fine", 1))
	bad := policy(ns, "bad", 2)
	bad.Spec.Priority = 5
	bad.Spec.Rules[1].Conditions[1] = v1alpha1.Condition{Field: "input.command", Operator: "matches", Value: jsonValue(`"(?=x)"`)}
	create(t, bad)

	st := waitForPolicyReady(t, ns, "bad", v1alpha1.ReasonCompileError)
	msg := readyOf(st.Status.Conditions).Message
	for _, want := range []string{`rule 1 ("r1")`, "condition 1", "spec.rules[1].conditions[1].value"} {
		if !strings.Contains(msg, want) {
			t.Errorf("CompileError message %q does not name %q", msg, want)
		}
	}
	if readyOf(st.Status.Conditions).Status != "False" || st.Status.BundleRevision == "" {
		t.Errorf("status %+v: want Ready=False and the revision it is (fail-closed) live in", st.Status)
	}
	if ev := waitForEvent(t, ns, "bad", "Warning", v1alpha1.ReasonCompileError); !strings.Contains(ev.Note, "condition 1") {
		t.Errorf("event note %q", ev.Note)
	}
	fine := waitForPolicyReady(t, ns, "fine", v1alpha1.ReasonPublished)

	_, b := testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "bad policy published", func(b engine.Bundle) bool { return len(b.Policies) == 2 })
	// bad, created last, went live in b; fine in b or in the revision
	// before (where its generation went live).
	if b.Revision != st.Status.BundleRevision || fine.Status.BundleRevision == "" {
		t.Fatalf("bundle %s, statuses %s and %s", b.Revision, st.Status.BundleRevision, fine.Status.BundleRevision)
	}
	c, diags := engine.Compile(b)
	if len(diags) != 1 || diags[0].PolicyID != "bad" {
		t.Fatalf("published bundle diagnostics %v", diags)
	}
	r := c.Evaluate(engine.Request{"tool_name": "anything"}, engine.EvalOptions{})
	if r.Decision != engine.Deny || r.Code != engine.CodePolicyCompileError || r.MatchedPolicyID != "bad" {
		t.Fatalf("published bundle decides %+v, want deny POLICY_COMPILE_ERROR", r)
	}
}
