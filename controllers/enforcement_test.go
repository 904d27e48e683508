package controllers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/internal/testenv"
)

// agentPod creates a Pod labelled as injected, as the injector labels the
// Pods it gives a sidecar (no kubelet runs it: it stays Pending, live).
func agentPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{v1alpha1.LabelInjected: "true"}},
		Spec: corev1.PodSpec{AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}}}
	create(t, p)
	return p
}

// writeLease creates or updates the sidecar Lease of pod as a sidecar
// writes it: named after the Pod, labelled, owned by it, renewed now.
func writeLease(t *testing.T, pod *corev1.Pod, r v1alpha1.SidecarReport, durationSeconds int32) {
	t.Helper()
	ctx := context.Background()
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name}}
	err := k8s.Get(ctx, client.ObjectKeyFromObject(l), l)
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	l.Labels = map[string]string{v1alpha1.LabelSidecar: "true"}
	l.Annotations = r.Annotations()
	l.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID}}
	l.Spec.HolderIdentity = ptr.To(pod.Name)
	l.Spec.LeaseDurationSeconds = ptr.To(durationSeconds)
	l.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	if apierrors.IsNotFound(err) {
		err = k8s.Create(ctx, l)
	} else {
		err = k8s.Update(ctx, l)
	}
	if err != nil {
		t.Fatalf("writing Lease %s: %v", pod.Name, err)
	}
}

// setPolicySpec updates p's spec, retrying on the conflicts the operator's
// status writes cause.
func setPolicySpec(t *testing.T, p *v1alpha1.Policy, spec v1alpha1.PolicySpec) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		p.Spec = spec
		return k8s.Update(context.Background(), p)
	})
	if err != nil {
		t.Fatalf("updating Policy %s: %v", p.Name, err)
	}
}

func serving(revision string, frozen ...string) v1alpha1.SidecarReport {
	return v1alpha1.NewSidecarReport(revision, frozen, "test")
}

// enforcedOf is the object's Enforced condition, or nil.
func enforcedOf(conds []metav1.Condition) *metav1.Condition {
	return apimeta.FindStatusCondition(conds, v1alpha1.ConditionEnforced)
}

// waitForEnforced waits until the object's Enforced condition, for its
// current generation, has reason and summary and a message naming every
// string of names; it returns the object.
func waitForEnforced[T client.Object](t *testing.T, obj T, conds func(T) ([]metav1.Condition, *v1alpha1.EnforcementStatus), reason, summary string, names ...string) T {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("%s Enforced %s %s", obj.GetName(), reason, summary), func() (bool, string) {
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return false, err.Error()
		}
		cs, st := conds(obj)
		c := enforcedOf(cs)
		if c == nil || st == nil {
			return false, "no Enforced condition or enforcement status"
		}
		ok := c.Reason == reason && st.Summary == summary && c.ObservedGeneration == obj.GetGeneration() && containsAll(c.Message, names...)
		return ok, fmt.Sprintf("Enforced=%s %s %q, %+v (generation %d, observed %d)", c.Status, c.Reason, c.Message, *st, obj.GetGeneration(), c.ObservedGeneration)
	})
	return obj
}

func policyConds(p *v1alpha1.Policy) ([]metav1.Condition, *v1alpha1.EnforcementStatus) {
	return p.Status.Conditions, p.Status.Enforcement
}

func frozenConds(f *v1alpha1.FrozenAgent) ([]metav1.Condition, *v1alpha1.EnforcementStatus) {
	return f.Status.Conditions, f.Status.Enforcement
}

func TestEnforcedFollowsSidecarLeases(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-enf-")
	startManager(t, controllers.Options{}, ns)
	a, b := agentPod(t, ns, "agent-a"), agentPod(t, ns, "agent-b")
	create(t, policy(ns, "p", 1))
	p := waitForPolicyReady(t, ns, "p", v1alpha1.ReasonPublished)
	first := p.Status.BundleRevision

	// Two injected Pods, no Lease: their sidecars say nothing.
	waitForEnforced(t, p, policyConds, v1alpha1.ReasonSidecarsUnreporting, "0/2", "2 of 2", "Pod agent-a")

	writeLease(t, a, serving(first), v1alpha1.SidecarLeaseDurationSeconds)
	waitForEnforced(t, p, policyConds, v1alpha1.ReasonSidecarsUnreporting, "1/2", "1 of 2", "Pod agent-b")
	writeLease(t, b, serving(first), v1alpha1.SidecarLeaseDurationSeconds)
	p = waitForEnforced(t, p, policyConds, v1alpha1.ReasonAllSidecarsCurrent, "2/2")
	if st := p.Status.Enforcement; st.Sidecars != 2 || st.Current != 2 || st.Stale+st.Refusing+st.Unreporting != 0 {
		t.Fatalf("enforcement %+v, want 2 current of 2", *st)
	}

	// A change is published, and stale until both sidecars serve it.
	setPolicySpec(t, p, policy(ns, "p", 2).Spec)
	p = waitForPolicyReady(t, ns, "p", v1alpha1.ReasonPublished)
	second := p.Status.BundleRevision
	if second == first {
		t.Fatalf("a changed policy is live in the same revision %s", first)
	}
	waitForEnforced(t, p, policyConds, v1alpha1.ReasonSidecarsStale, "0/2", "2 of 2", "Pod agent-a", first)
	writeLease(t, a, serving(second), v1alpha1.SidecarLeaseDurationSeconds)
	waitForEnforced(t, p, policyConds, v1alpha1.ReasonSidecarsStale, "1/2", "1 of 2", "Pod agent-b")
	start := time.Now()
	writeLease(t, b, serving(second), v1alpha1.SidecarLeaseDurationSeconds)
	waitForEnforced(t, p, policyConds, v1alpha1.ReasonAllSidecarsCurrent, "2/2")
	t.Logf("the last sidecar's Lease to Enforced=True 2/2: %v", time.Since(start).Round(time.Millisecond))

	// A sidecar that refuses the next bundle names itself and its reason.
	setPolicySpec(t, p, policy(ns, "p", 3).Spec)
	p = waitForPolicyReady(t, ns, "p", v1alpha1.ReasonPublished)
	third := p.Status.BundleRevision
	refusing := serving(second)
	refusing.Refused(third, "signature by a key this sidecar does not trust")
	writeLease(t, b, refusing, v1alpha1.SidecarLeaseDurationSeconds)
	writeLease(t, a, serving(third), v1alpha1.SidecarLeaseDurationSeconds)
	p = waitForEnforced(t, p, policyConds, v1alpha1.ReasonSidecarRefusing, "1/2", "Pod agent-b", third, "does not trust")
	if st := p.Status.Enforcement; st.Refusing != 1 || st.Current != 1 {
		t.Fatalf("enforcement %+v, want 1 refusing and 1 current", *st)
	}

	// A Lease not renewed within its duration stops speaking for its
	// sidecar, with no event to say so: the operator comes back at expiry.
	writeLease(t, b, serving(third), 2)
	waitForEnforced(t, p, policyConds, v1alpha1.ReasonAllSidecarsCurrent, "2/2")
	waitForEnforced(t, p, policyConds, v1alpha1.ReasonSidecarsUnreporting, "1/2", "Pod agent-b")

	// A Pod that is deleting is no longer a live sidecar.
	if err := k8s.Delete(context.Background(), b); err != nil {
		t.Fatal(err)
	}
	waitForEnforced(t, p, policyConds, v1alpha1.ReasonAllSidecarsCurrent, "1/1")
}

func TestEnforcedWithoutSidecars(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-enf-")
	startManager(t, controllers.Options{}, ns)
	create(t, policy(ns, "p", 1))
	p := waitForPolicyReady(t, ns, "p", v1alpha1.ReasonPublished)
	p = waitForEnforced(t, p, policyConds, v1alpha1.ReasonNoSidecars, "0/0")
	if c := enforcedOf(p.Status.Conditions); c.Status != metav1.ConditionTrue {
		t.Fatalf("Enforced %s without sidecars, want True", c.Status)
	}
}

func TestPolicyThatDoesNotCompileIsNotEnforced(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-enf-")
	startManager(t, controllers.Options{}, ns)
	bad := policy(ns, "bad", 1)
	bad.Spec.Rules[0].Conditions[0].Operator = "matches"
	bad.Spec.Rules[0].Conditions[0].Value = jsonValue(`"("`)
	if err := k8s.Create(context.Background(), bad); err != nil {
		t.Fatalf("the API server (no webhook here) refused a policy only the engine finds wrong: %v", err)
	}
	p := waitForPolicyReady(t, ns, "bad", v1alpha1.ReasonCompileError)
	waitForEnforced(t, p, policyConds, v1alpha1.ReasonNotPublished, "0/0", "see Ready")
}

func TestFrozenAgentEnforcedByFreezeNames(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-enf-")
	startManager(t, controllers.Options{}, ns)
	a := agentPod(t, ns, "agent-a")
	create(t, policy(ns, "p", 1))
	create(t, frozenAgent(ns, "stop-bob", "bob", nil))
	f := waitForFrozenReady(t, ns, "stop-bob", v1alpha1.ReasonPublished)
	name := v1alpha1.FreezeName("FrozenAgent", "stop-bob")

	// Named in the Lease: applied, whatever bundle the sidecar serves
	// (its own FrozenAgent watch is faster than the bundle).
	writeLease(t, a, serving("some-older-revision", name), v1alpha1.SidecarLeaseDurationSeconds)
	waitForEnforced(t, f, frozenConds, v1alpha1.ReasonAllSidecarsCurrent, "1/1")
	p := &v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p"}}
	waitForEnforced(t, p, policyConds, v1alpha1.ReasonSidecarsStale, "0/1", "some-older-revision")

	// Not named, and the list not truncated: not applied.
	writeLease(t, a, serving("some-older-revision", "FrozenAgent/someone-else"), v1alpha1.SidecarLeaseDurationSeconds)
	waitForEnforced(t, f, frozenConds, v1alpha1.ReasonSidecarsStale, "0/1", "Pod agent-a")

	// A truncated list: the digest of every freeze the namespace has.
	truncated := v1alpha1.SidecarReport{Revision: "some-older-revision", FrozenTruncated: true,
		Frozen: []string{"FrozenAgent/a-0"}, FreezeDigest: v1alpha1.FreezeDigest([]string{name})}
	writeLease(t, a, truncated, v1alpha1.SidecarLeaseDurationSeconds)
	waitForEnforced(t, f, frozenConds, v1alpha1.ReasonAllSidecarsCurrent, "1/1")
	truncated.FreezeDigest = v1alpha1.FreezeDigest([]string{name, "FrozenAgent/gone"})
	writeLease(t, a, truncated, v1alpha1.SidecarLeaseDurationSeconds)
	waitForEnforced(t, f, frozenConds, v1alpha1.ReasonSidecarsStale, "0/1")

	// Or the bundle it serves carries the freeze's generation.
	writeLease(t, a, serving(f.Status.BundleRevision), v1alpha1.SidecarLeaseDurationSeconds)
	waitForEnforced(t, f, frozenConds, v1alpha1.ReasonAllSidecarsCurrent, "1/1")
	waitForEnforced(t, p, policyConds, v1alpha1.ReasonAllSidecarsCurrent, "1/1")
}

// A sidecar's report moves only the objects whose enforcement it changes:
// a Policy whose content did not change is not written again when the
// sidecars take up another Policy's change.
func TestSidecarReportsWriteOnlyWhatTheyChange(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-enf-")
	startManager(t, controllers.Options{}, ns)
	a := agentPod(t, ns, "agent-a")
	create(t, policy(ns, "steady", 1))
	create(t, policy(ns, "moving", 1))
	moving := waitForPolicyReady(t, ns, "moving", v1alpha1.ReasonPublished)
	writeLease(t, a, serving(moving.Status.BundleRevision), v1alpha1.SidecarLeaseDurationSeconds)
	steady := &v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "steady"}}
	steady = waitForEnforced(t, steady, policyConds, v1alpha1.ReasonAllSidecarsCurrent, "1/1")
	since := enforcedOf(steady.Status.Conditions).LastTransitionTime

	setPolicySpec(t, moving, policy(ns, "moving", 2).Spec)
	moving = waitForPolicyReady(t, ns, "moving", v1alpha1.ReasonPublished)
	waitForEnforced(t, moving, policyConds, v1alpha1.ReasonSidecarsStale, "0/1")
	// The sidecar still serves a bundle with steady's generation: current.
	steady = waitForEnforced(t, steady, policyConds, v1alpha1.ReasonAllSidecarsCurrent, "1/1")
	settle(t, a)
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(steady), steady); err != nil {
		t.Fatal(err)
	}
	before := steady.ResourceVersion

	writeLease(t, a, serving(moving.Status.BundleRevision), v1alpha1.SidecarLeaseDurationSeconds)
	waitForEnforced(t, moving, policyConds, v1alpha1.ReasonAllSidecarsCurrent, "1/1")
	settle(t, a)
	if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(steady), steady); err != nil {
		t.Fatal(err)
	}
	if steady.ResourceVersion != before {
		t.Fatalf("the sidecar's report rewrote the unchanged Policy (resourceVersion %s -> %s): %+v", before, steady.ResourceVersion, steady.Status)
	}
	if c := enforcedOf(steady.Status.Conditions); c.Status != metav1.ConditionTrue || !c.LastTransitionTime.Equal(&since) {
		t.Fatalf("the unchanged Policy's Enforced moved: %+v (True since %s)", c, since)
	}
}

// settle waits until a status pass that started after every write before
// it has finished: it touches the Lease (a version the operator ignores
// but an annotation change it reacts to) and waits for the status
// controller to complete one more reconcile.
func settle(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	done := reconciles(t, controllers.StatusControllerName, "success") + reconciles(t, controllers.StatusControllerName, "requeue_after")
	var l coordinationv1.Lease
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, &l); err != nil {
		t.Fatal(err)
	}
	l.Annotations[v1alpha1.AnnotationLeaseVersion] = fmt.Sprintf("settle-%d", time.Now().UnixNano())
	if err := k8s.Update(context.Background(), &l); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "a status pass after the Lease touch", func() (bool, string) {
		n := reconciles(t, controllers.StatusControllerName, "success") + reconciles(t, controllers.StatusControllerName, "requeue_after")
		return n > done, fmt.Sprintf("%v reconciles, %v before", n, done)
	})
}
