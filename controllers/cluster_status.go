package controllers

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
)

// clusterProgress sums up, for one cluster-scoped object, the last outcome
// of every namespace its selector chooses.
type clusterProgress struct {
	selected int
	// pending are namespaces whose last publish did not see the object's
	// current generation (yet).
	pending []string
	// failedIn is the first namespace whose bundle could not be published,
	// failed its outcome.
	failedIn string
	failed   outcome
}

// progressOf reads, for obj, the outcomes of the namespaces it selects.
// freeze: obj is a freeze, live even in a BundleTooLarge namespace when
// its freezes went out alone (publishFreezes).
func progressOf(obj metav1.Object, namespaces []string, outcomes *outcomeStore, freeze bool) clusterProgress {
	p := clusterProgress{selected: len(namespaces)}
	for _, ns := range namespaces {
		o, ok := outcomes.get(ns)
		switch {
		case !ok || !o.describes(obj):
			p.pending = append(p.pending, ns)
		case p.failedIn != "":
		case o.publishErr != nil, o.tooLarge != nil && !(freeze && o.freezeRevision != ""):
			p.failedIn, p.failed = ns, o
		}
	}
	return p
}

// failure is the Ready condition of an object whose bundle failed in one of
// its namespaces, and whether that generation is observed (Stalled rather
// than retrying).
func (p clusterProgress) failure(cond metav1.Condition) (metav1.Condition, bool) {
	cond.Status = metav1.ConditionFalse
	if p.failed.publishErr != nil {
		cond.Reason = v1alpha1.ReasonPublishFailed
		cond.Message = fmt.Sprintf("namespace %s: %s", p.failedIn, p.failed.publishFailedMessage())
		return cond, !p.failed.retrying()
	}
	cond.Reason = v1alpha1.ReasonBundleTooLarge
	cond.Message = fmt.Sprintf("namespace %s: %v", p.failedIn, p.failed.tooLarge)
	return cond, true
}

// clusterPolicyStatus is the status cp should have, and whether it waits on
// namespaces still publishing it. problems are its compile diagnostics
// (engine.CheckPolicy, the compile step the webhook runs); selErr is why its selector does not
// parse (it then applies to every namespace: bundle.Selects).
func clusterPolicyStatus(cp *v1alpha1.ClusterPolicy, problems []engine.Diagnostic, selErr error, p clusterProgress, now time.Time) (v1alpha1.ClusterPolicyStatus, bool) {
	st := *cp.Status.DeepCopy()
	st.RuleCount, st.Namespaces = int32(len(cp.Spec.Rules)), int32(p.selected)
	cond := metav1.Condition{Type: v1alpha1.ConditionReady, ObservedGeneration: cp.Generation, LastTransitionTime: metav1.NewTime(now)}
	retrying := false
	switch {
	case selErr != nil:
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonSelectorError
		cond.Message = fmt.Sprintf("spec.namespaceSelector: %v; the policy applies to every namespace until it is fixed", selErr)
	case len(problems) > 0:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, v1alpha1.ReasonCompileError, diagnosticsMessage(problems)
	case p.failedIn != "":
		var observed bool
		cond, observed = p.failure(cond)
		retrying = !observed
	case len(p.pending) > 0:
		if conds := reconciling(st.Conditions, cp.Generation, now); conds != nil {
			st.Conditions = conds
		}
		return st, true
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.ReasonPublished
		cond.Message = fmt.Sprintf("live in the bundles of the %d namespaces it selects", p.selected)
	}
	if !retrying {
		st.ObservedGeneration = cp.Generation
	}
	st.Conditions = withProgress(st.Conditions, cond, retrying)
	return st, false
}

// clusterFrozenAgentStatus is the status cf should have, and whether it
// waits on namespaces still publishing it. An expired freeze is left out of
// every bundle.
func clusterFrozenAgentStatus(cf *v1alpha1.ClusterFrozenAgent, selErr error, p clusterProgress, now time.Time) (v1alpha1.ClusterFrozenAgentStatus, bool) {
	frozen := bundle.FrozenAgent(&v1alpha1.FrozenAgent{Spec: cf.Spec.FrozenAgentSpec})
	st := *cf.Status.DeepCopy()
	st.Namespaces = int32(p.selected)
	cond := metav1.Condition{Type: v1alpha1.ConditionReady, ObservedGeneration: cf.Generation, LastTransitionTime: metav1.NewTime(now)}
	retrying := false
	switch {
	case frozen.Expired(now):
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonExpired
		cond.Message = fmt.Sprintf("expired at %s and removed from the bundles of the namespaces it selects",
			cf.Spec.ExpiresAt.UTC().Format(time.RFC3339))
	case selErr != nil:
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonSelectorError
		cond.Message = fmt.Sprintf("spec.namespaceSelector: %v; the freeze applies to every namespace until it is fixed", selErr)
	case p.failedIn != "":
		var observed bool
		cond, observed = p.failure(cond)
		retrying = !observed
	case len(p.pending) > 0:
		if conds := reconciling(st.Conditions, cf.Generation, now); conds != nil {
			st.Conditions = conds
		}
		return st, true
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.ReasonPublished
		cond.Message = fmt.Sprintf("live in the bundles of the %d namespaces it selects: %s is denied every call (AGENT_FROZEN)",
			p.selected, frozen.Describe())
	}
	if !retrying {
		st.ObservedGeneration = cf.Generation
	}
	st.Conditions = withProgress(st.Conditions, cond, retrying)
	return st, false
}
