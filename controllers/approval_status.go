package controllers

import (
	"fmt"
	"time"

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
		// decidedAt is the decider's word; the condition's transition time
		// is the operator's clock (finishedAtFor).
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
	// The transition time moves only when the state does: it says since
	// when the request has been Denied, Pending... (kstatus, kubectl wait).
	if prev := apimeta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady); prev != nil &&
		prev.Status == status && prev.Reason == v.reason {
		v.ready.LastTransitionTime = prev.LastTransitionTime
	}
	if v.reason == v1alpha1.ReasonDenied {
		v.finishedAt = v.ready.LastTransitionTime.Time
	}
	return v
}

// conditions returns ar's conditions with Ready set to v's, or nil when
// they already say it.
func (v approvalView) conditions(ar *v1alpha1.ApprovalRequest) []metav1.Condition {
	prev := apimeta.FindStatusCondition(ar.Status.Conditions, v1alpha1.ConditionReady)
	if prev != nil && prev.Status == v.ready.Status && prev.Reason == v.ready.Reason && prev.Message == v.ready.Message &&
		prev.ObservedGeneration == v.ready.ObservedGeneration && prev.LastTransitionTime.Equal(&v.ready.LastTransitionTime) {
		return nil
	}
	conds := make([]metav1.Condition, 0, len(ar.Status.Conditions)+1)
	for _, c := range ar.Status.Conditions {
		if c.Type != v1alpha1.ConditionReady {
			conds = append(conds, c)
		}
	}
	return append(conds, v.ready)
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
