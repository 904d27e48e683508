package controllers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/internal/testenv"
)

// approvalRequest is a request for a payment, as a sidecar writes one,
// expiring after expiresIn (negative: already expired).
func approvalRequest(ns, name string, expiresIn time.Duration) *v1alpha1.ApprovalRequest {
	return &v1alpha1.ApprovalRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.ApprovalRequestSpec{AgentID: "shop-agent", ServiceAccount: "shop-agent", Tool: "pay", Server: "payments",
			ArgumentsDigest: "sha256:" + strings.Repeat("ab", 32), Preview: `{"kwargs":{"amount":5000}}`,
			Policy: "pay-cap", Rule: "pay-over-cap", PolicyVersion: 1, Reason: "payments over 1000 need a human approval",
			ExpiresAt: metav1.NewTime(time.Now().Add(expiresIn).Truncate(time.Second))}}
}

// patchStatus writes a status merge patch as kubectl patch --subresource=status
// does: only the fields given.
func patchApprovalStatus(t *testing.T, ns, name, status string) {
	t.Helper()
	ar := &v1alpha1.ApprovalRequest{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	patch := client.RawPatch(types.MergePatchType, []byte(`{"status":`+status+`}`))
	if err := k8s.Status().Patch(context.Background(), ar, patch); err != nil {
		t.Fatalf("patching the status of %s with %s: %v", name, status, err)
	}
}

// waitForApprovalReady waits for the request's Ready condition to have
// reason and to describe its generation; it returns the request.
func waitForApprovalReady(t *testing.T, ns, name, reason string) *v1alpha1.ApprovalRequest {
	t.Helper()
	var ar v1alpha1.ApprovalRequest
	testenv.Eventually(t, fmt.Sprintf("ApprovalRequest %s Ready reason %s", name, reason), func() (bool, string) {
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &ar); err != nil {
			return false, err.Error()
		}
		c := readyOf(ar.Status.Conditions)
		if c == nil {
			return false, "no Ready condition"
		}
		return c.Reason == reason && c.ObservedGeneration == ar.Generation,
			fmt.Sprintf("Ready=%s reason %s (generation %d, observed %d)", c.Status, c.Reason, ar.Generation, c.ObservedGeneration)
	})
	return &ar
}

func wantReady(t *testing.T, ar *v1alpha1.ApprovalRequest, status metav1.ConditionStatus) {
	t.Helper()
	if c := readyOf(ar.Status.Conditions); c.Status != status {
		t.Errorf("%s: Ready=%s reason %s, want %s", ar.Name, c.Status, c.Reason, status)
	}
}

// outcomes reads toolgate_approvals_total for every outcome.
func outcomes() map[string]float64 {
	m := map[string]float64{}
	for _, o := range []string{"requested", "approved", "denied", "expired", "consumed"} {
		m[o] = controllers.ApprovalsCount(o)
	}
	return m
}

// Ready through each state, an Event at each transition, the counter once
// per transition and the pending gauge, on the real manager: a request is
// Pending (False); approved (True), then consumed (True, Consumed); another
// denied (True); a third expires undecided (False, Expired). The operator
// leaves decision, decidedBy and consumedAt as they were written. A
// restarted operator counts and announces nothing again, and finds the
// pending requests again.
func TestApprovalRequestLifecycle(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-approval-")
	before := outcomes()
	mgr := startManager(t, controllers.Options{}, ns)
	defer mgr.stop()

	create(t, approvalRequest(ns, "pay-a", time.Hour))
	create(t, approvalRequest(ns, "pay-b", time.Hour))
	create(t, approvalRequest(ns, "pay-c", 3*time.Second))
	for _, name := range []string{"pay-a", "pay-b"} {
		wantReady(t, waitForApprovalReady(t, ns, name, v1alpha1.ReasonApprovalPending), metav1.ConditionFalse)
	}
	e := waitForEvent(t, ns, "pay-a", "Normal", v1alpha1.ReasonApprovalRequested)
	for _, want := range []string{`agent "shop-agent"`, "pay on server payments", "payments over 1000 need a human approval",
		"toolgate approve pay-a -n " + ns,
		"kubectl patch approvalrequest pay-a -n " + ns + ` --subresource=status --type=merge -p '{"status":{"decision":"Approved","decidedBy":"<you>"}}'`} {
		if !strings.Contains(e.Note, want) {
			t.Errorf("ApprovalRequested event %q lacks %q", e.Note, want)
		}
	}
	testenv.Eventually(t, "3 pending in the gauge", func() (bool, string) {
		v, ok := controllers.ApprovalsPending(ns)
		return ok && v == 3, fmt.Sprintf("%v (series %v)", v, ok)
	})

	// Times near now: retention (a day) counts from consumedAt, so a fixed
	// date would have the operator delete the request once that day is past.
	decidedAt := time.Now().UTC().Truncate(time.Second).Add(-time.Minute)
	consumedAt := decidedAt.Add(5 * time.Second).Format(time.RFC3339)
	patchApprovalStatus(t, ns, "pay-a", `{"decision":"Approved","decidedBy":"alice","decidedAt":"`+decidedAt.Format(time.RFC3339)+`"}`)
	wantReady(t, waitForApprovalReady(t, ns, "pay-a", v1alpha1.ReasonApproved), metav1.ConditionTrue)
	waitForEvent(t, ns, "pay-a", "Normal", v1alpha1.ReasonApproved)
	patchApprovalStatus(t, ns, "pay-a", `{"consumedAt":"`+consumedAt+`"}`)
	a := waitForApprovalReady(t, ns, "pay-a", v1alpha1.ReasonConsumed)
	wantReady(t, a, metav1.ConditionTrue)
	waitForEvent(t, ns, "pay-a", "Normal", v1alpha1.ReasonConsumed)
	if a.Status.Decision != v1alpha1.ApprovalApproved || a.Status.DecidedBy != "alice" ||
		a.Status.DecidedAt == nil || !a.Status.DecidedAt.Equal(&metav1.Time{Time: decidedAt}) ||
		a.Status.ConsumedAt == nil || a.Status.ConsumedAt.UTC().Format(time.RFC3339) != consumedAt {
		t.Errorf("the operator changed what others wrote: %+v", a.Status)
	}

	patchApprovalStatus(t, ns, "pay-b", `{"decision":"Denied","decidedBy":"bob","message":"not this month"}`)
	wantReady(t, waitForApprovalReady(t, ns, "pay-b", v1alpha1.ReasonDenied), metav1.ConditionTrue)
	waitForEvent(t, ns, "pay-b", "Normal", v1alpha1.ReasonDenied)

	c := waitForApprovalReady(t, ns, "pay-c", v1alpha1.ReasonApprovalExpired)
	wantReady(t, c, metav1.ConditionFalse)
	if c.Status.Decision != "" {
		t.Errorf("an expired request got a decision: %+v", c.Status)
	}
	if st := apimeta.FindStatusCondition(c.Status.Conditions, v1alpha1.ConditionStalled); st == nil ||
		st.Status != metav1.ConditionTrue || st.Reason != v1alpha1.ReasonApprovalExpired {
		t.Errorf("an expired request is not Stalled (kstatus Failed): %+v", c.Status.Conditions)
	}
	waitForEvent(t, ns, "pay-c", "Normal", v1alpha1.ReasonApprovalExpired)
	testenv.Eventually(t, "no pending request left in the gauge", func() (bool, string) {
		v, ok := controllers.ApprovalsPending(ns)
		return !ok, fmt.Sprintf("%v (series %v)", v, ok)
	})

	want := map[string]float64{"requested": 3, "approved": 1, "denied": 1, "expired": 1, "consumed": 1}
	checkOutcomes := func(when string) {
		t.Helper()
		after := outcomes()
		for o, n := range want {
			if got := after[o] - before[o]; got != n {
				t.Errorf("%s: toolgate_approvals_total{outcome=%q} rose by %v, want %v", when, o, got, n)
			}
		}
	}
	checkOutcomes("after the transitions")

	// A restart, and a request made while no operator ran: it is counted
	// and announced; the finished ones are neither counted nor announced
	// again, nor written.
	mgr.stop()
	create(t, approvalRequest(ns, "pay-d", time.Hour))
	finished := map[string]string{}
	events := map[string]int{}
	for _, name := range []string{"pay-a", "pay-b", "pay-c"} {
		var ar v1alpha1.ApprovalRequest
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &ar); err != nil {
			t.Fatal(err)
		}
		finished[name], events[name] = ar.ResourceVersion, countEvents(t, ns, name)
	}
	looked := reconciles(t, controllers.ApprovalControllerName, "requeue_after")
	startManager(t, controllers.Options{}, ns)
	waitForApprovalReady(t, ns, "pay-d", v1alpha1.ReasonApprovalPending)
	waitForEvent(t, ns, "pay-d", "Normal", v1alpha1.ReasonApprovalRequested)
	testenv.Eventually(t, "the restarted operator looks at all 4 requests", func() (bool, string) {
		n := reconciles(t, controllers.ApprovalControllerName, "requeue_after") - looked
		return n >= 4, fmt.Sprintf("%v reconciles", n)
	})
	testenv.Eventually(t, "the pending request back in the gauge", func() (bool, string) {
		v, ok := controllers.ApprovalsPending(ns)
		return ok && v == 1, fmt.Sprintf("%v (series %v)", v, ok)
	})
	time.Sleep(time.Second) // events are sent in the background: give a duplicate the time to show
	want["requested"]++
	checkOutcomes("after a restart")
	for name, rv := range finished {
		var ar v1alpha1.ApprovalRequest
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &ar); err != nil {
			t.Fatal(err)
		}
		if ar.ResourceVersion != rv {
			t.Errorf("%s rewritten after the restart: %+v", name, ar.Status.Conditions)
		}
		if n := countEvents(t, ns, name); n != events[name] {
			t.Errorf("%s: %d events after the restart, %d before", name, n, events[name])
		}
	}
}

// countEvents counts the events about one object, each repetition of a
// series too.
func countEvents(t *testing.T, ns, regarding string) int {
	t.Helper()
	n := 0
	var list eventsv1.EventList
	if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Regarding.Name == regarding {
			n++
			if e.Series != nil {
				n += int(e.Series.Count) - 1
			}
		}
	}
	return n
}

// A finished request is deleted its retention after it finished, not
// before; a pending one stays.
func TestApprovalRequestsDeletedAfterRetention(t *testing.T) {
	const retention = 3 * time.Second
	ns := testenv.Namespace(t, k8s, "tg-approval-")
	startManager(t, controllers.Options{Approvals: controllers.ApprovalOptions{Retention: retention}}, ns)
	expiring := approvalRequest(ns, "expiring", time.Second)
	create(t, expiring)
	create(t, approvalRequest(ns, "denied", time.Hour))
	create(t, approvalRequest(ns, "pending", time.Hour))
	waitForApprovalReady(t, ns, "denied", v1alpha1.ReasonApprovalPending)
	patchApprovalStatus(t, ns, "denied", `{"decision":"Denied","decidedBy":"bob"}`)
	denied := waitForApprovalReady(t, ns, "denied", v1alpha1.ReasonDenied)
	deniedAt := readyOf(denied.Status.Conditions).LastTransitionTime.Time

	for name, finished := range map[string]time.Time{"expiring": expiring.Spec.ExpiresAt.Time, "denied": deniedAt} {
		testenv.Eventually(t, name+" deleted", func() (bool, string) {
			err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &v1alpha1.ApprovalRequest{})
			return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
		})
		// Transition times have a second's resolution.
		if gone := time.Now(); gone.Before(finished.Add(retention - time.Second)) {
			t.Errorf("%s deleted at %s, finished at %s: before its retention of %s", name, gone, finished, retention)
		}
	}
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "pending"}, &v1alpha1.ApprovalRequest{}); err != nil {
		t.Errorf("the pending request: %v", err)
	}
}
