package chart

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/manager"
)

// TestOperatorFollowsApprovalsAsInstalled runs the real operator as the
// chart's manager ServiceAccount, with the chart's RBAC and approvals
// admission policy in force: the policy lets through every condition it
// writes (Pending, Approved, Consumed, Expired with Stalled) and its
// deletions after the retention, while a person approves with toolgate and
// the sidecar's ServiceAccount consumes; once the operator has marked a
// request Expired, the admin's approval is refused.
func TestOperatorFollowsApprovalsAsInstalled(t *testing.T) {
	in := installApprovals(t, "approvals-operator")
	const admin = plainUser("olga")
	bindAdmin(t, in.ns, admin)

	asManager := rest.CopyConfig(cfg)
	asManager.Impersonate = rest.ImpersonationConfig{UserName: in.manager.user(), Groups: in.manager.groups()}
	o := manager.DefaultOptions()
	o.MetricsBindAddress, o.HealthProbeBindAddress, o.Webhooks.Enabled = "0", "0", false
	o.Namespaces = []string{in.ns}
	o.Controller.SkipNameValidation = true
	o.Controller.Approvals.Retention = 2 * time.Second
	mgr, err := manager.New(asManager, o)
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("the operator stopped with: %v", err)
		}
	})

	in.ask(t, "pay-used", time.Hour)
	expiring := in.ask(t, "pay-expiring", 2*time.Second)
	waitForReason(t, in, "pay-used", v1alpha1.ReasonApprovalPending)
	if code, out := in.toolgate(t, admin, "approve", "pay-used"); code != 0 {
		t.Fatalf("approve: exit %d\n%s", code, out)
	}
	waitForReason(t, in, "pay-used", v1alpha1.ReasonApproved)
	used := in.get(t, "pay-used")
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	used.Status.ConsumedAt = &now
	if err := in.as(t, in.sidecar).Status().Update(ctx(t), used); err != nil {
		t.Fatalf("the sidecar consuming: %v", err)
	}
	waitForReason(t, in, "pay-used", v1alpha1.ReasonConsumed)

	marked := waitForReason(t, in, "pay-expiring", v1alpha1.ReasonApprovalExpired)
	if c := meta.FindStatusCondition(marked.Status.Conditions, v1alpha1.ConditionStalled); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("the expired request is not Stalled: %+v", marked.Status.Conditions)
	}
	decide(marked, v1alpha1.ApprovalApproved, string(admin), expiring.Spec.ExpiresAt.Add(-time.Second))
	requireRefusal(t, "approving a request the operator marked Expired", in.as(t, admin).Status().Update(ctx(t), marked), refusedExpired)

	for _, name := range []string{"pay-used", "pay-expiring"} {
		testenv.Eventually(t, name+" deleted after the retention", func() (bool, string) {
			err := in.admin.Get(ctx(t), client.ObjectKey{Namespace: in.ns, Name: name}, &v1alpha1.ApprovalRequest{})
			return apierrors.IsNotFound(err), fmt.Sprint(err)
		})
	}
}

// waitForReason waits for the operator to write Ready with reason on the
// request's current generation, and returns the request.
func waitForReason(t *testing.T, in approvalsInstall, name, reason string) *v1alpha1.ApprovalRequest {
	t.Helper()
	var ar *v1alpha1.ApprovalRequest
	testenv.Eventually(t, fmt.Sprintf("%s Ready reason %s", name, reason), func() (bool, string) {
		ar = in.get(t, name)
		c := meta.FindStatusCondition(ar.Status.Conditions, v1alpha1.ConditionReady)
		if c == nil {
			return false, "no Ready condition"
		}
		return c.Reason == reason && c.ObservedGeneration == ar.Generation, c.Reason + ": " + c.Message
	})
	return ar
}
