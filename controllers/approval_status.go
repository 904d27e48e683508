package controllers

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/approval"
)

// approvalView is where an ApprovalRequest stands, a pure function of the
// object and the clock (approvalState): the Ready condition it should
// carry, and when its next change is due.
type approvalView struct {
	// reason is Ready's reason: Pending, Approved, Denied, Expired or
	// Consumed (v1alpha1.Reason*).
	reason string
	ready  metav1.Condition
	// stalled is kstatus' Stalled=True, on an Expired request only.
	stalled *metav1.Condition
	// finishedAt is when the request stopped mattering (expired, denied,
	// consumed): retention counts from it. Zero while it may still be
	// decided or used.
	finishedAt time.Time
	// expiresAt is when a pending or approved request expires: the
	// reconciler looks again then.
	expiresAt time.Time
}

// approvalState reads ar's status as of now. Consumed wins over
// everything (the call ran); then a denial; an approval counts until
// expiresAt, past which an unused one is Expired like an undecided one:
// no sidecar lets a call through on it any more.
func approvalState(ar *v1alpha1.ApprovalRequest, now time.Time) approvalView {
	st, expires := &ar.Status, ar.Spec.ExpiresAt.Time
	expired := !now.Before(expires)
	v := approvalView{}
	var status metav1.ConditionStatus
	var msg string
	switch {
	case st.ConsumedAt != nil:
		v.reason, status, v.finishedAt = v1alpha1.ReasonConsumed, metav1.ConditionTrue, st.ConsumedAt.Time
		msg = fmt.Sprintf("approved by %s; the call ran at %s", orUnknown(st.DecidedBy), st.ConsumedAt.UTC().Format(time.RFC3339))
	case st.Decision == v1alpha1.ApprovalDenied:
		v.reason, status = v1alpha1.ReasonDenied, metav1.ConditionTrue
		msg = "denied by " + orUnknown(st.DecidedBy)
		// decidedAt is the decider's word; retention counts from the
		// condition's transition time instead, the operator's clock (below).
	case st.Decision == v1alpha1.ApprovalApproved && !expired:
		v.reason, status, v.expiresAt = v1alpha1.ReasonApproved, metav1.ConditionTrue, expires
		msg = fmt.Sprintf("approved by %s; one matching call may run until %s", orUnknown(st.DecidedBy), expires.UTC().Format(time.RFC3339))
	case st.Decision == v1alpha1.ApprovalApproved:
		v.reason, status, v.finishedAt = v1alpha1.ReasonApprovalExpired, metav1.ConditionFalse, expires
		msg = fmt.Sprintf("approved by %s but not used before it expired at %s", orUnknown(st.DecidedBy), expires.UTC().Format(time.RFC3339))
	case expired:
		v.reason, status, v.finishedAt = v1alpha1.ReasonApprovalExpired, metav1.ConditionFalse, expires
		msg = fmt.Sprintf("nobody decided before it expired at %s: a call still waiting was denied %s", expires.UTC().Format(time.RFC3339), approval.CodeTimeout)
	default:
		v.reason, status, v.expiresAt = v1alpha1.ReasonApprovalPending, metav1.ConditionFalse, expires
		msg = fmt.Sprintf("waiting for a person to approve or deny until %s", expires.UTC().Format(time.RFC3339))
	}
	v.ready = metav1.Condition{Type: v1alpha1.ConditionReady, Status: status, Reason: v.reason, Message: msg,
		ObservedGeneration: ar.Generation, LastTransitionTime: metav1.NewTime(now)}
	keepTransitionTime(&v.ready, st.Conditions)
	if v.reason == v1alpha1.ReasonDenied {
		v.finishedAt = v.ready.LastTransitionTime.Time
	}
	if v.reason == v1alpha1.ReasonApprovalExpired {
		// Ready=False alone reads as InProgress to kstatus (Flux, Argo CD,
		// kstatus waits): an expired request waits for nothing any more.
		v.stalled = &metav1.Condition{Type: v1alpha1.ConditionStalled, Status: metav1.ConditionTrue, Reason: v.reason, Message: msg,
			ObservedGeneration: ar.Generation, LastTransitionTime: metav1.NewTime(now)}
		keepTransitionTime(v.stalled, st.Conditions)
	}
	return v
}

// keepTransitionTime keeps the transition time of c's type from conds when
// its status and reason are unchanged: it says since when the request has
// been Denied, Pending... (kstatus, kubectl wait).
func keepTransitionTime(c *metav1.Condition, conds []metav1.Condition) {
	if prev := apimeta.FindStatusCondition(conds, c.Type); prev != nil && prev.Status == c.Status && prev.Reason == c.Reason {
		c.LastTransitionTime = prev.LastTransitionTime
	}
}

// conditions returns ar's conditions with Ready, and Stalled, as v says,
// or nil when they already do.
func (v approvalView) conditions(ar *v1alpha1.ApprovalRequest) []metav1.Condition {
	want := []metav1.Condition{v.ready}
	if v.stalled != nil {
		want = append(want, *v.stalled)
	}
	conds := make([]metav1.Condition, 0, len(ar.Status.Conditions)+1)
	for _, c := range ar.Status.Conditions {
		if c.Type != v1alpha1.ConditionReady && c.Type != v1alpha1.ConditionStalled {
			conds = append(conds, c)
		}
	}
	conds = append(conds, want...)
	if len(conds) == len(ar.Status.Conditions) {
		same := true
		for _, c := range want {
			prev := apimeta.FindStatusCondition(ar.Status.Conditions, c.Type)
			same = same && prev != nil && equality.Semantic.DeepEqual(*prev, c)
		}
		if same {
			return nil
		}
	}
	return conds
}

// previousReason is the Ready reason the operator last wrote on ar, ""
// when it never wrote one: what the transition counted now is from.
func previousReason(ar *v1alpha1.ApprovalRequest) string {
	if c := apimeta.FindStatusCondition(ar.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

func orUnknown(user string) string {
	if user == "" {
		return "(unknown)"
	}
	return user
}
