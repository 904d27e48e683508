package sidecarlease

import (
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/internal/testenv"
)

// requireRefused fails unless err is the policy's refusal (not RBAC's,
// not a conflict) and says what it must.
func requireRefused(t *testing.T, what string, err error, says ...string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: admitted", what)
		return
	}
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), refusal) {
		t.Errorf("%s: %v, want the sidecar Lease policy's refusal", what, err)
		return
	}
	for _, s := range says {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("%s: %q does not say %q", what, err, s)
		}
	}
}

func leasesAs(t *testing.T, token, ns string) coordinationv1client.LeaseInterface {
	t.Helper()
	c, err := kubernetes.NewForConfig(asToken(token))
	if err != nil {
		t.Fatal(err)
	}
	return c.CoordinationV1().Leases(ns)
}

// TestAttackSidecarCannotWriteAnotherPodsLease: agent-0's sidecar, with
// its Pod-bound token and the Role injection grants, writes its own Lease
// and no other: not agent-1's (created or updated), not its own owned by
// another Pod, and deletes none (RBAC). The Lease it writes is owned by
// its Pod, so the garbage collector deletes it with the Pod (envtest runs
// no garbage collector: the ownerReference is what is checked).
func TestAttackSidecarCannotWriteAnotherPodsLease(t *testing.T) {
	requireLeasePolicy(t)
	ns := newAgentNamespace(t, "lease-sidecar-", "agent-0", "agent-1")
	mine, theirs := leasesAs(t, ns.podToken(t, "agent-0"), ns.name), leasesAs(t, ns.podToken(t, "agent-1"), ns.name)
	p0, p1 := ns.pods["agent-0"], ns.pods["agent-1"]

	_, err := mine.Create(ctx(t), sidecarLease(ns.name, "agent-1", p1), metav1.CreateOptions{})
	requireRefused(t, "agent-0's sidecar creating agent-1's Lease", err, "written only by the sidecar of Pod agent-1", "bound to Pod agent-0")
	_, err = mine.Create(ctx(t), sidecarLease(ns.name, "agent-0", p1), metav1.CreateOptions{})
	requireRefused(t, "its own Lease owned by agent-1", err, "ownerReference must be its Pod")
	_, err = mine.Create(ctx(t), sidecarLease(ns.name, "agent-0", nil), metav1.CreateOptions{})
	requireRefused(t, "its own Lease owned by nothing", err, "ownerReference must be its Pod")
	forgedUID := sidecarLease(ns.name, "agent-0", p0)
	forgedUID.OwnerReferences[0].UID = p1.UID
	_, err = mine.Create(ctx(t), forgedUID, metav1.CreateOptions{})
	requireRefused(t, "its own Lease owned by a Pod of its name with another UID", err, "the UID of the Pod whose token writes it")

	own, err := mine.Create(ctx(t), sidecarLease(ns.name, "agent-0", p0), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("agent-0's sidecar creating its own Lease: %v", err)
	}
	if o := own.OwnerReferences; len(o) != 1 || o[0].Kind != "Pod" || o[0].Name != "agent-0" || o[0].UID != p0.UID {
		t.Errorf("the Lease's owner %+v: the garbage collector would not delete it with Pod agent-0 (%s)", o, p0.UID)
	}
	own.Annotations[v1alpha1.AnnotationLeaseRevision] = "r2"
	if _, err = mine.Update(ctx(t), own, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("agent-0's sidecar renewing its own Lease: %v", err)
	}
	other, err := theirs.Create(ctx(t), sidecarLease(ns.name, "agent-1", p1), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("agent-1's sidecar creating its own Lease: %v", err)
	}
	other.Annotations[v1alpha1.AnnotationLeaseRevision] = "current-looking"
	_, err = mine.Update(ctx(t), other, metav1.UpdateOptions{})
	requireRefused(t, "agent-0's sidecar updating agent-1's Lease", err, "may not update it")
	err = mine.Delete(ctx(t), "agent-1", metav1.DeleteOptions{})
	if !apierrors.IsForbidden(err) {
		t.Errorf("agent-0's sidecar deleting agent-1's Lease: %v, want Forbidden", err)
	}
	if err := mine.Delete(ctx(t), "agent-0", metav1.DeleteOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("a sidecar deleting its own Lease: %v, want Forbidden (it goes with its Pod)", err)
	}

	// The garbage collector, as the API server's bootstrap RBAC lets it,
	// orphans (takes the ownerReference off) and deletes a sidecar Lease.
	gcCfg := *cfg
	gcCfg.Impersonate.UserName = "system:serviceaccount:kube-system:generic-garbage-collector"
	gcCfg.Impersonate.Groups = []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"}
	gcClient, err := kubernetes.NewForConfig(&gcCfg)
	if err != nil {
		t.Fatal(err)
	}
	gc := gcClient.CoordinationV1().Leases(ns.name)
	if _, err := gc.Patch(ctx(t), "agent-1", "application/merge-patch+json", []byte(`{"metadata":{"ownerReferences":null}}`), metav1.PatchOptions{}); err != nil {
		t.Errorf("the garbage collector orphaning a sidecar Lease: %v", err)
	}
	if err := gc.Delete(ctx(t), "agent-0", metav1.DeleteOptions{}); err != nil {
		t.Errorf("the garbage collector deleting a sidecar Lease with its Pod: %v", err)
	}
}

// TestAttackEditUserCannotForgeASidecarLease: a user bound to the built-in
// edit role (impersonated, with written RBAC) may write Leases in the
// namespace, yet cannot make a stale namespace look current: it cannot
// create, update or delete a labelled Lease, label an unlabelled one, or
// take the label off one. Ordinary Leases stay its own to write.
func TestAttackEditUserCannotForgeASidecarLease(t *testing.T) {
	requireLeasePolicy(t)
	ns := newAgentNamespace(t, "lease-edit-", "agent-0")
	const mallory = "mallory"
	testenv.BindEdit(t, admin, ns.name, mallory)
	if !testenv.CanEventually(t, admin, mallory, []string{"system:authenticated"}, "create", "coordination.k8s.io", "leases", ns.name, "") {
		t.Fatalf("RBAC: edit does not let %s write Leases in %s; the test would prove nothing", mallory, ns.name)
	}
	editCfg := *cfg
	editCfg.Impersonate.UserName = mallory
	editCfg.Impersonate.Groups = []string{"system:authenticated"}
	c, err := kubernetes.NewForConfig(&editCfg)
	if err != nil {
		t.Fatal(err)
	}
	edit := c.CoordinationV1().Leases(ns.name)
	p0 := ns.pods["agent-0"]

	_, err = edit.Create(ctx(t), sidecarLease(ns.name, "agent-0", p0), metav1.CreateOptions{})
	requireRefused(t, "edit creating a sidecar's Lease", err, "mallory may not create it")

	// The one the sidecar writes.
	sidecar := leasesAs(t, ns.podToken(t, "agent-0"), ns.name)
	written, err := sidecar.Create(ctx(t), sidecarLease(ns.name, "agent-0", p0), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bumped := written.DeepCopy()
	bumped.Annotations[v1alpha1.AnnotationLeaseRevision] = "the-latest"
	bumped.Spec.RenewTime = ptrMicroNow()
	_, err = edit.Update(ctx(t), bumped, metav1.UpdateOptions{})
	requireRefused(t, "edit updating a sidecar's Lease", err, "mallory may not update it")
	unlabelled := written.DeepCopy()
	delete(unlabelled.Labels, v1alpha1.LabelSidecar)
	_, err = edit.Update(ctx(t), unlabelled, metav1.UpdateOptions{})
	requireRefused(t, "edit taking the label off a sidecar's Lease", err, "mallory may not update it")
	_, err = edit.Patch(ctx(t), "agent-0", "application/merge-patch+json",
		[]byte(`{"metadata":{"annotations":{"`+v1alpha1.AnnotationLeaseRevision+`":"the-latest"}}}`), metav1.PatchOptions{})
	requireRefused(t, "edit patching a sidecar's Lease", err)
	err = edit.Delete(ctx(t), "agent-0", metav1.DeleteOptions{})
	requireRefused(t, "edit deleting a sidecar's Lease", err, "mallory may not delete it")
	_ = edit.DeleteCollection(ctx(t), metav1.DeleteOptions{}, metav1.ListOptions{})
	if _, err := sidecar.Get(ctx(t), "agent-0", metav1.GetOptions{}); err != nil {
		t.Errorf("after edit deleted every Lease of the namespace, the sidecar's: %v", err)
	}

	// An ordinary Lease is edit's to write; labelling it is not.
	decoy := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns.name, Name: "leader-election"}}
	if decoy, err = edit.Create(ctx(t), decoy, metav1.CreateOptions{}); err != nil {
		t.Fatalf("edit can no longer create an ordinary Lease: %v", err)
	}
	decoy.Labels = map[string]string{v1alpha1.LabelSidecar: "true"}
	decoy.Annotations = v1alpha1.NewSidecarReport("the-latest", nil, "v0").Annotations()
	_, err = edit.Update(ctx(t), decoy, metav1.UpdateOptions{})
	requireRefused(t, "edit labelling an ordinary Lease", err, "mallory may not update it")
	if err := edit.Delete(ctx(t), "leader-election", metav1.DeleteOptions{}); err != nil {
		t.Errorf("edit deleting an ordinary Lease: %v", err)
	}

	got, err := sidecar.Get(ctx(t), "agent-0", metav1.GetOptions{})
	if err != nil || got.Annotations[v1alpha1.AnnotationLeaseRevision] != "forged" || got.Labels[v1alpha1.LabelSidecar] != "true" {
		t.Errorf("the sidecar's Lease after the attacks: %+v, %v", got, err)
	}
}

func ptrMicroNow() *metav1.MicroTime {
	now := metav1.NowMicro()
	return &now
}
