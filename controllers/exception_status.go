package controllers

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
)

// exceptionStatus is the status pe should have: Applied, live in the
// namespace's bundle, or why it exempts nothing (Expired, PolicyNotFound,
// ExceptionsNotAllowed) as bundle.BuildSources decided when it built that
// bundle. Only an Applied exception names the revision it is live in.
func exceptionStatus(pe *v1alpha1.PolicyException, o outcome) v1alpha1.PolicyExceptionStatus {
	st := *pe.Status.DeepCopy()
	cond := metav1.Condition{Type: v1alpha1.ConditionReady, ObservedGeneration: pe.Generation,
		LastTransitionTime: metav1.NewTime(o.now)}
	state := o.exceptions[pe.Name]
	switch {
	case o.publishErr != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, v1alpha1.ReasonPublishFailed, o.publishFailedMessage()
		if !o.retrying() {
			st.ObservedGeneration = pe.Generation // Stalled, as a policy's
		}
	case state.Reason != bundle.ExceptionApplied:
		cond.Status, cond.Reason = metav1.ConditionFalse, state.Reason
		cond.Message = fmt.Sprintf("%s: it exempts nothing and is not in ConfigMap %s", state.Message, o.configMap)
		st.ObservedGeneration = pe.Generation
		st.BundleRevision = ""
	case o.tooLarge != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, v1alpha1.ReasonBundleTooLarge, o.tooLarge.Error()
		st.ObservedGeneration = pe.Generation
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.ReasonApplied
		cond.Message = fmt.Sprintf("live in ConfigMap %s until %s: %s %q rules %v", o.configMap,
			pe.Spec.ExpiresAt.UTC().Format(time.RFC3339), pe.Spec.PolicyRef.Kind, pe.Spec.PolicyRef.Name, pe.Spec.RuleIDs)
		st.BundleRevision = liveSince(pe, pe.Status.Conditions, pe.Status.ObservedGeneration, pe.Status.BundleRevision, o.revision)
		st.ObservedGeneration = pe.Generation
	}
	st.Conditions = withProgress(st.Conditions, cond, o.retrying())
	return st
}
