package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/internal/testenv"
)

// kobject names an object the test reads as kstatus does.
type kobject struct{ kind, name string }

// kread reads o from the API server as unstructured, as Flux and
// kstatus-based tools do, and computes its kstatus.
func kread(t *testing.T, ns string, o kobject) (*status.Result, *unstructured.Unstructured) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind(o.kind))
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: o.name}, u); err != nil {
		t.Fatal(err)
	}
	res, err := status.Compute(u)
	if err != nil {
		t.Fatalf("kstatus of %s %s: %v", o.kind, o.name, err)
	}
	return res, u
}

// kcondition is u's condition typ: its reason ("" without one), and
// whether it describes u's current generation.
func kcondition(u *unstructured.Unstructured, typ string) (reason string, current bool) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == typ {
			gen, _ := m["observedGeneration"].(int64)
			r, _ := m["reason"].(string)
			return r, gen == u.GetGeneration()
		}
	}
	return "", false
}

// waitForKstatus waits until kstatus reads every object as want, for the
// reason given (of Ready for Current and Failed, of Reconciling for
// InProgress) on the object's current generation.
func waitForKstatus(t *testing.T, ns, stage string, want status.Status, reason string, objs ...kobject) {
	t.Helper()
	typ := v1alpha1.ConditionReady
	if want == status.InProgressStatus {
		typ = v1alpha1.ConditionReconciling
	}
	testenv.Eventually(t, fmt.Sprintf("%s: kstatus %s (%s %s)", stage, want, typ, reason), func() (bool, string) {
		var seen []string
		ok := true
		for _, o := range objs {
			res, u := kread(t, ns, o)
			r, current := kcondition(u, typ)
			ok = ok && res.Status == want && r == reason && current
			seen = append(seen, fmt.Sprintf("%s %s: %s (%s), %s %s current %v", o.kind, o.name, res.Status, res.Message, typ, r, current))
		}
		return ok, strings.Join(seen, "; ")
	})
}

// TestKstatusReadsTheConditions: kstatus, which Flux health checks and
// kstatus-based waits use, reads Policies and FrozenAgents, read as
// unstructured from the API server, as what they are at each stage: never
// Failed while they are only being published or while the API server is
// briefly failing (InProgress), Failed when they cannot be published until
// someone fixes something (a compile error, a write an admission policy
// refuses), and Current once live.
func TestKstatusReadsTheConditions(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-")
	startManager(t, controllers.Options{}, ns)
	pol, frz := kobject{"Policy", "steady"}, kobject{"FrozenAgent", "freeze"}
	both := []kobject{pol, frz}
	create(t, policy(ns, "steady", 3))
	create(t, frozenAgent(ns, "freeze", "agent-1", nil))

	// Created: whatever kstatus reads before and while the controller
	// observes them, it is never Failed.
	testenv.Eventually(t, "created: observed by the controller", func() (bool, string) {
		observed := true
		for _, o := range both {
			res, u := kread(t, ns, o)
			if res.Status != status.CurrentStatus && res.Status != status.InProgressStatus {
				t.Fatalf("created: kstatus reads %s %s as %s (%s)", o.kind, o.name, res.Status, res.Message)
			}
			_, found, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			observed = observed && found
		}
		return observed, "no conditions yet"
	})
	waitForKstatus(t, ns, "published", status.CurrentStatus, v1alpha1.ReasonPublished, both...)

	var p v1alpha1.Policy
	edit := func(change func(*v1alpha1.Policy)) {
		t.Helper()
		if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: pol.name}, &p); err != nil {
			t.Fatal(err)
		}
		change(&p)
		if err := k8s.Update(context.Background(), &p); err != nil {
			t.Fatal(err)
		}
	}
	good := policy(ns, "steady", 3).Spec

	edit(func(p *v1alpha1.Policy) {
		p.Spec.Rules[1].Conditions[1] = v1alpha1.Condition{Field: "input.command", Operator: "matches", Value: jsonValue(`"(?=x)"`)}
	})
	waitForKstatus(t, ns, "compile error", status.FailedStatus, v1alpha1.ReasonCompileError, pol)
	waitForKstatus(t, ns, "compile error, the freeze", status.CurrentStatus, v1alpha1.ReasonPublished, frz)
	edit(func(p *v1alpha1.Policy) { p.Spec = good })
	waitForKstatus(t, ns, "compile error fixed", status.CurrentStatus, v1alpha1.ReasonPublished, both...)

	// Refused by an admission policy: it stays refused until someone acts.
	// The policy's new generation and the freeze both fail.
	lift := refuseBundleWrites(t, ns, "bundle writes are refused in this namespace (test)")
	edit(func(p *v1alpha1.Policy) { p.Spec.Rules = p.Spec.Rules[:2] })
	waitForKstatus(t, ns, "publish refused", status.FailedStatus, v1alpha1.ReasonPublishFailed, both...)
	lift()
	waitForKstatus(t, ns, "refusal lifted", status.CurrentStatus, v1alpha1.ReasonPublished, both...)

	// The API server fails the write with a 500 (a webhook it cannot
	// reach): the publish is retried and is in progress, never Failed, for
	// as long as that lasts.
	lift = failBundleWritesTransiently(t, ns)
	edit(func(p *v1alpha1.Policy) { p.Spec = good })
	waitForKstatus(t, ns, "publish failing transiently", status.InProgressStatus, v1alpha1.ReasonPublishRetrying, both...)
	errorsBefore := reconciles(t, controllers.ControllerName, "error")
	testenv.Eventually(t, "three more failed publishes, none read as Failed", func() (bool, string) {
		for _, o := range both {
			if res, u := kread(t, ns, o); res.Status != status.InProgressStatus {
				ready, _ := kcondition(u, v1alpha1.ConditionReady)
				t.Fatalf("publish failing transiently: kstatus reads %s %s as %s (%s), Ready %s", o.kind, o.name, res.Status, res.Message, ready)
			}
		}
		n := reconciles(t, controllers.ControllerName, "error") - errorsBefore
		return n >= 3, fmt.Sprint(n)
	})
	_, u := kread(t, ns, pol)
	if msg, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions"); !strings.Contains(fmt.Sprint(msg), "failed calling webhook") {
		t.Errorf("conditions %v do not carry the API server's error", msg)
	}
	lift()
	waitForKstatus(t, ns, "fixed again", status.CurrentStatus, v1alpha1.ReasonPublished, both...)
	for _, o := range both {
		_, u := kread(t, ns, o)
		for _, typ := range []string{v1alpha1.ConditionReconciling, v1alpha1.ConditionStalled} {
			if r, _ := kcondition(u, typ); r != "" {
				t.Errorf("fixed again: %s %s is still %s (%s)", o.kind, o.name, typ, r)
			}
		}
	}
}
