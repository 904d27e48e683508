package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/internal/testenv"
)

// refuseBundleWrites makes the API server refuse, for real, every write of
// ns's bundle ConfigMap (an admission policy, as a misconfigured cluster
// might have), until the test ends or the returned func is called.
func refuseBundleWrites(t *testing.T, ns, message string) (lift func()) {
	t.Helper()
	ctx := context.Background()
	vap := &admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "refuse-" + ns},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptrTo(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update, admissionv1.Delete},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
				}}}},
			MatchConditions: []admissionv1.MatchCondition{{Name: "this-bundle",
				Expression: fmt.Sprintf("request.namespace == %q && request.name == %q", ns, bundle.DefaultConfigMapName)}},
			Validations: []admissionv1.Validation{{Expression: "false", Message: message}},
		}}
	binding := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: vap.Name},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: vap.Name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}}}
	create(t, vap)
	create(t, binding)
	lifted := false
	lift = func() {
		if lifted {
			return
		}
		lifted = true
		for _, o := range []client.Object{binding, vap} {
			if err := k8s.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
				t.Errorf("deleting %s: %v", o.GetName(), err)
			}
		}
	}
	t.Cleanup(lift)
	// The policy reaches admission through an informer: wait until a
	// no-op write of the bundle is refused.
	testenv.Eventually(t, "bundle writes refused", func() (bool, string) {
		cm, found := getBundleConfigMap(t, ns)
		if !found {
			return false, "no bundle"
		}
		err := k8s.Update(ctx, cm)
		return err != nil && strings.Contains(err.Error(), message), fmt.Sprint(err)
	})
	return lift
}

// failBundleWritesTransiently makes every write of ns's bundle ConfigMap
// fail as an API server under trouble answers: a webhook it must call
// (failurePolicy Fail) listens on a closed loopback port, so the API server
// answers 500 InternalError "failed calling webhook". It lasts until the
// test ends or the returned func is called.
func failBundleWritesTransiently(t *testing.T, ns string) (lift func()) {
	t.Helper()
	ctx := context.Background()
	url := "https://" + testenv.FreeLoopbackAddr(t) + "/validate"
	whc := &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "unreachable-" + ns},
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name:                    "unreachable.toolgate.test",
			ClientConfig:            admissionv1.WebhookClientConfig{URL: &url},
			FailurePolicy:           ptrTo(admissionv1.Fail),
			SideEffects:             ptrTo(admissionv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			TimeoutSeconds:          ptrTo(int32(2)),
			Rules: []admissionv1.RuleWithOperations{{
				Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
				Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
			}},
			MatchConditions: []admissionv1.MatchCondition{{Name: "this-bundle",
				Expression: fmt.Sprintf("request.namespace == %q && request.name == %q", ns, bundle.DefaultConfigMapName)}},
		}}}
	create(t, whc)
	lifted := false
	lift = func() {
		if lifted {
			return
		}
		lifted = true
		if err := k8s.Delete(ctx, whc); client.IgnoreNotFound(err) != nil {
			t.Errorf("deleting %s: %v", whc.Name, err)
		}
	}
	t.Cleanup(lift)
	testenv.Eventually(t, "bundle writes fail calling the webhook", func() (bool, string) {
		cm, found := getBundleConfigMap(t, ns)
		if !found {
			return false, "no bundle"
		}
		err := k8s.Update(ctx, cm)
		return apierrors.IsInternalError(err) && strings.Contains(err.Error(), "failed calling webhook"), fmt.Sprint(err)
	})
	return lift
}

func ptrTo[T any](v T) *T { return &v }

// TestPublishFailureSetsReadyFalse: when the API server refuses the bundle's
// write (here an admission policy: Forbidden, which will not pass by itself),
// the namespace's Policies and FrozenAgents say so (Ready=False,
// PublishFailed, with the API error, and kstatus Stalled) instead of
// keeping a stale Ready=True; each gets one event for the failure streak,
// not one per retry. Once writes go through, they are Ready again.
func TestPublishFailureSetsReadyFalse(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-")
	startManager(t, controllers.Options{}, ns)
	b := settled(t, ns)
	const refusal = "bundle writes are refused in this namespace (test)"
	lift := refuseBundleWrites(t, ns, refusal)

	var p v1alpha1.Policy
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "steady"}, &p); err != nil {
		t.Fatal(err)
	}
	live := p.Status.BundleRevision // where this generation went live, at or before b
	p.Spec.Rules = p.Spec.Rules[:2]
	if err := k8s.Update(context.Background(), &p); err != nil {
		t.Fatal(err)
	}
	failed := waitForPolicyReady(t, ns, "steady", v1alpha1.ReasonPublishFailed)
	ready := readyOf(failed.Status.Conditions)
	if ready.Status != metav1.ConditionFalse || !strings.Contains(ready.Message, refusal) || !strings.Contains(ready.Message, bundle.DefaultConfigMapName) {
		t.Errorf("Ready = %s %q, want False with the API server's refusal", ready.Status, ready.Message)
	}
	// The refused generation is observed (kstatus reads Stalled only on an
	// observed generation); the revision and rule count stay what is live.
	if failed.Status.BundleRevision != live || failed.Status.RuleCount != 3 || failed.Status.ObservedGeneration != failed.Generation {
		t.Errorf("status %+v: want generation %d observed, still live in %s (bundle %s) with 3 rules", failed.Status, failed.Generation, live, b.Revision)
	}
	requireCondition(t, failed.Status.Conditions, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonPublishFailed)
	if c := findCondition(failed.Status.Conditions, v1alpha1.ConditionReconciling); c != nil {
		t.Errorf("an admission policy's refusal is Reconciling (%s): it does not pass by itself", c.Reason)
	}
	f := waitForFrozenReady(t, ns, "freeze", v1alpha1.ReasonPublishFailed)
	requireCondition(t, f.Status.Conditions, v1alpha1.ConditionStalled, metav1.ConditionTrue, v1alpha1.ReasonPublishFailed)

	// Let it retry a few times: still one event per object.
	errorsBefore := reconciles(t, controllers.ControllerName, "error")
	testenv.Eventually(t, "three more failed publishes", func() (bool, string) {
		n := reconciles(t, controllers.ControllerName, "error") - errorsBefore
		return n >= 3, fmt.Sprintf("%v", n)
	})
	for _, name := range []string{"steady", "freeze"} {
		evs := publishFailedEvents(t, ns, name)
		if len(evs) != 1 {
			t.Errorf("%s: %d PublishFailed events, want 1 for the streak", name, len(evs))
		}
		for _, e := range evs {
			if e.Series != nil && e.Series.Count > 1 {
				t.Errorf("%s: PublishFailed event repeated %d times, want once for the streak", name, e.Series.Count)
			}
		}
	}

	lift()
	testenv.Eventually(t, "Ready again once writes go through", func() (bool, string) {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(&p), &p); err != nil {
			return false, err.Error()
		}
		c := readyOf(p.Status.Conditions)
		return c != nil && c.Reason == v1alpha1.ReasonPublished && p.Status.ObservedGeneration == p.Generation,
			fmt.Sprintf("%+v", c)
	})
	for _, typ := range []string{v1alpha1.ConditionStalled, v1alpha1.ConditionReconciling} {
		if c := findCondition(p.Status.Conditions, typ); c != nil {
			t.Errorf("after the publish, %s is still %s (%s)", typ, c.Status, c.Reason)
		}
	}
}

func publishFailedEvents(t *testing.T, ns, regarding string) []eventsv1.Event {
	t.Helper()
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.Name == regarding && e.Reason == v1alpha1.ReasonPublishFailed {
			out = append(out, e)
		}
	}
	return out
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

func requireCondition(t *testing.T, conds []metav1.Condition, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	c := findCondition(conds, typ)
	if c == nil || c.Status != status || c.Reason != reason {
		t.Errorf("%s = %+v, want %s with reason %s", typ, c, status, reason)
	}
}
