package controllers

import (
	"errors"
	"fmt"
	"strings"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/rego"
)

// maxConditionMessage keeps a message with many diagnostics readable and well
// under the API's 32 KiB limit.
const maxConditionMessage = 4096

// outcome is what one publish of a namespace achieved; the status of each
// object is a pure function of it and the object.
type outcome struct {
	configMap string
	revision  string // the revision now live; unused when tooLarge is set
	tooLarge  error  // the bundle was not published: the previous one stays
	// publishErr is the API server's refusal of the bundle's write: nothing
	// of this outcome is live, the previous bundle (if any) stays.
	publishErr error
	// freezeRevision, with tooLarge, is the revision that carries the
	// current freezes on top of the last published policies; "" if none.
	freezeRevision string
	// freezeAlone: that revision carries no policies (none published yet by
	// this process to build on).
	freezeAlone bool
	// regoErr is why the published ConfigMap carries no Rego bundle
	// (PublishRego): rego.Export refused the bundle.
	regoErr error
	diags   map[string][]engine.Diagnostic
	now     time.Time
	// generations are those of the objects the bundle was built from: a
	// status describes only what was published.
	generations map[types.UID]int64
	// conflicts maps the Agents left out for naming a ServiceAccount an
	// older Agent registers to that Agent's name.
	conflicts map[string]string
	// exceptions says, per PolicyException name, whether it was compiled
	// in and, if not, why (bundle.BuildSources).
	exceptions map[string]bundle.ExceptionState
}

func newOutcome(in inputs, configMap, revision string, diags []engine.Diagnostic, now time.Time) outcome {
	o := outcome{configMap: configMap, revision: revision, now: now,
		diags: make(map[string][]engine.Diagnostic), generations: make(map[types.UID]int64, len(in.policies)+len(in.frozen))}
	for _, d := range diags {
		if d.PolicyKind != "" {
			continue // a ClusterPolicy's: its own status says (cluster_status.go)
		}
		o.diags[d.PolicyID] = append(o.diags[d.PolicyID], d)
	}
	for i := range in.policies {
		o.generations[in.policies[i].UID] = in.policies[i].Generation
	}
	for i := range in.frozen {
		o.generations[in.frozen[i].UID] = in.frozen[i].Generation
	}
	for i := range in.registration.Agents {
		o.generations[in.registration.Agents[i].UID] = in.registration.Agents[i].Generation
	}
	for i := range in.exceptions {
		o.generations[in.exceptions[i].UID] = in.exceptions[i].Generation
	}
	// The cluster-scoped objects' statuses sum up the outcomes of every
	// namespace they select (clusterPublished).
	for i := range in.clusterPolicies {
		o.generations[in.clusterPolicies[i].UID] = in.clusterPolicies[i].Generation
	}
	for i := range in.clusterFrozen {
		o.generations[in.clusterFrozen[i].UID] = in.clusterFrozen[i].Generation
	}
	for i := range in.registration.Upstreams {
		o.generations[in.registration.Upstreams[i].UID] = in.registration.Upstreams[i].Generation
	}
	o.conflicts = bundle.Conflicts(in.registration.Agents)
	return o
}

// describes tells whether o was computed from obj as it is now.
func (o outcome) describes(obj metav1.Object) bool {
	gen, ok := o.generations[obj.GetUID()]
	return ok && gen == obj.GetGeneration()
}

// policyStatus is the status p should have. Only a generation that made it
// into a published bundle is observed; a BundleTooLarge one is not live yet.
func policyStatus(p *v1alpha1.Policy, o outcome) v1alpha1.PolicyStatus {
	st := *p.Status.DeepCopy()
	cond := metav1.Condition{Type: v1alpha1.ConditionReady, ObservedGeneration: p.Generation,
		LastTransitionTime: metav1.NewTime(o.now)}
	switch diags := o.diags[p.Name]; {
	case o.publishErr != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, v1alpha1.ReasonPublishFailed, o.publishFailedMessage()
	case o.tooLarge != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, v1alpha1.ReasonBundleTooLarge, o.tooLarge.Error()
	case len(diags) > 0:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, v1alpha1.ReasonCompileError, diagnosticsMessage(diags)
	case o.regoRefuses(p.Name):
		// Live for the sidecars: only the Rego bundle is missing.
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.ReasonRegoExportRefused
		cond.Message = fmt.Sprintf("live in ConfigMap %s, which carries no Rego bundle (%s, --publish-rego) until this is fixed: %v",
			o.configMap, bundle.RegoTarKey, o.regoErr)
		if len(cond.Message) > maxConditionMessage {
			cond.Message = strings.ToValidUTF8(cond.Message[:maxConditionMessage-3], "") + "..."
		}
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.ReasonPublished
		cond.Message = fmt.Sprintf("live in ConfigMap %s", o.configMap)
	}
	switch {
	case o.tooLarge == nil && o.publishErr == nil:
		// A policy that does not compile is still published (sidecars deny
		// POLICY_COMPILE_ERROR when they reach it), so it is live too.
		st.BundleRevision = liveSince(p, p.Status.Conditions, p.Status.ObservedGeneration, p.Status.BundleRevision, o.revision)
		st.ObservedGeneration = p.Generation
		st.RuleCount = int32(len(p.Spec.Rules))
	case !o.retrying():
		// Stalled: the verdict on this generation is in, and kstatus reads
		// Stalled only on an observed generation. The revision and rule
		// count stay those of what is live.
		st.ObservedGeneration = p.Generation
	}
	st.Conditions = withProgress(st.Conditions, cond, o.retrying())
	return st
}

// frozenAgentStatus is the status f should have. An expired freeze is left
// out of the bundle, so it is live in no revision. A live one's message says
// what it stops (engine.FrozenAgent.Describe): a freeze of every agent
// names no agent in its spec, so this is where kubectl describe says so.
func frozenAgentStatus(f *v1alpha1.FrozenAgent, o outcome) v1alpha1.FrozenAgentStatus {
	frozen := bundle.FrozenAgent(f)
	denied := frozen.Describe() + " is denied every call (AGENT_FROZEN)"
	st := *f.Status.DeepCopy()
	cond := metav1.Condition{Type: v1alpha1.ConditionReady, ObservedGeneration: f.Generation,
		LastTransitionTime: metav1.NewTime(o.now)}
	switch {
	case o.publishErr != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, v1alpha1.ReasonPublishFailed, o.publishFailedMessage()
		if !o.retrying() {
			st.ObservedGeneration = f.Generation // Stalled, as a policy's
		}
	case frozen.Expired(o.now):
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonExpired
		cond.Message = fmt.Sprintf("expired at %s and removed from ConfigMap %s",
			f.Spec.ExpiresAt.UTC().Format(time.RFC3339), o.configMap)
		st.ObservedGeneration = f.Generation
		st.BundleRevision = ""
	case o.tooLarge != nil && o.freezeRevision == "":
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, v1alpha1.ReasonBundleTooLarge, o.tooLarge.Error()
		st.ObservedGeneration = f.Generation // Stalled, as a policy's
	case o.tooLarge != nil:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.ReasonPublished
		switch {
		case o.freezeAlone && frozen.All:
			// No other agent is left to be denied NO_POLICIES.
			cond.Message = fmt.Sprintf("live in ConfigMap %s, without policies (the namespace's policies are BundleTooLarge): %s", o.configMap, denied)
		case o.freezeAlone:
			cond.Message = fmt.Sprintf("live in ConfigMap %s, without policies: the namespace's policies are BundleTooLarge and the operator has published none since it started, so other agents are denied NO_POLICIES; %s", o.configMap, denied)
		default:
			cond.Message = fmt.Sprintf("live in ConfigMap %s, with the last policies that fit (the namespace's policies are BundleTooLarge): %s", o.configMap, denied)
		}
		st.BundleRevision = liveSince(f, f.Status.Conditions, f.Status.ObservedGeneration, f.Status.BundleRevision, o.freezeRevision)
		st.ObservedGeneration = f.Generation
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.ReasonPublished
		cond.Message = fmt.Sprintf("live in ConfigMap %s: %s", o.configMap, denied)
		st.BundleRevision = liveSince(f, f.Status.Conditions, f.Status.ObservedGeneration, f.Status.BundleRevision, o.revision)
		st.ObservedGeneration = f.Generation
	}
	st.Conditions = withProgress(st.Conditions, cond, o.retrying())
	return st
}

// identityStatus is the status an Agent or MCPUpstream should have: live
// with the namespace's bundle, or (an Agent) left out for a conflict.
func identityStatus(obj metav1.Object, was *v1alpha1.IdentityStatus, conflictWith string, o outcome) v1alpha1.IdentityStatus {
	st := *was.DeepCopy()
	cond := metav1.Condition{Type: v1alpha1.ConditionReady, ObservedGeneration: obj.GetGeneration(),
		LastTransitionTime: metav1.NewTime(o.now)}
	switch {
	case o.publishErr != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, v1alpha1.ReasonPublishFailed, o.publishFailedMessage()
		if !o.retrying() {
			st.ObservedGeneration = obj.GetGeneration()
		}
	case o.tooLarge != nil:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, v1alpha1.ReasonBundleTooLarge, o.tooLarge.Error()
		st.ObservedGeneration = obj.GetGeneration()
	case conflictWith != "":
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonConflict
		cond.Message = fmt.Sprintf("Agent %q, older, already registers this ServiceAccount: one Agent per ServiceAccount; delete one of them", conflictWith)
		st.ObservedGeneration = obj.GetGeneration()
		st.BundleRevision = ""
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.ReasonPublished
		cond.Message = fmt.Sprintf("live in ConfigMap %s", o.configMap)
		st.BundleRevision = liveSince(obj, was.Conditions, was.ObservedGeneration, was.BundleRevision, o.revision)
		st.ObservedGeneration = obj.GetGeneration()
	}
	st.Conditions = withProgress(st.Conditions, cond, o.retrying())
	return st
}

// liveSince is the revision a status names: the one in which the object's
// current generation went live. A publish brought about by another object
// of the namespace (or by a namespace label) does not move it, so that
// object's status is not written again; it moves when the object itself
// changed (a new generation) or was not live (never published, refused,
// too large, failed, expired). Every later revision of the namespace
// carries the same generation until the object changes, so the one named
// is where it started, not the only one that holds it.
func liveSince(obj metav1.Object, conds []metav1.Condition, observed int64, was, revision string) string {
	if was == "" || observed != obj.GetGeneration() {
		return revision
	}
	ready := apimeta.FindStatusCondition(conds, v1alpha1.ConditionReady)
	if ready == nil || ready.ObservedGeneration != obj.GetGeneration() {
		return revision
	}
	switch ready.Reason {
	case v1alpha1.ReasonBundleTooLarge, v1alpha1.ReasonPublishFailed, v1alpha1.ReasonExpired, v1alpha1.ReasonConflict:
		return revision
	}
	return was
}

// retrying tells whether the publish failed for a reason expected to pass by
// itself (publishRetryable): the objects are then Reconciling, not Stalled.
func (o outcome) retrying() bool { return o.publishErr != nil && publishRetryable(o.publishErr) }

// regoRefuses tells whether the Rego export failed because of the named
// policy; an error that names no policy concerns them all.
func (o outcome) regoRefuses(policy string) bool {
	if o.regoErr == nil {
		return false
	}
	var refusal *rego.RefusalError
	return !errors.As(o.regoErr, &refusal) || refusal.PolicyID == policy
}

func (o outcome) publishFailedMessage() string {
	format := "the bundle could not be written to ConfigMap %s, and will not be until this is fixed (retried with backoff): %v"
	if o.retrying() {
		format = "the bundle could not be written to ConfigMap %s yet (retrying): %v"
	}
	msg := fmt.Sprintf(format, o.configMap, o.publishErr)
	if len(msg) > maxConditionMessage {
		msg = strings.ToValidUTF8(msg[:maxConditionMessage-3], "") + "..."
	}
	return msg
}

// withProgress sets ready and the kstatus conditions that follow from it, on
// a copy of conds. While a publish is retrying, the generation is still
// Reconciling (reason PublishRetrying, with Ready's message) and not
// Stalled. Otherwise it is no longer Reconciling, and it is Stalled, with
// Ready's reason and message, when it cannot be published.
func withProgress(conds []metav1.Condition, ready metav1.Condition, retrying bool) []metav1.Condition {
	conds = append([]metav1.Condition(nil), conds...)
	apimeta.SetStatusCondition(&conds, ready)
	switch {
	case retrying:
		reconciling := ready
		reconciling.Type, reconciling.Status, reconciling.Reason =
			v1alpha1.ConditionReconciling, metav1.ConditionTrue, v1alpha1.ReasonPublishRetrying
		apimeta.SetStatusCondition(&conds, reconciling)
		apimeta.RemoveStatusCondition(&conds, v1alpha1.ConditionStalled)
	case ready.Reason == v1alpha1.ReasonCompileError, ready.Reason == v1alpha1.ReasonBundleTooLarge,
		ready.Reason == v1alpha1.ReasonPublishFailed, ready.Reason == v1alpha1.ReasonSelectorError:
		apimeta.RemoveStatusCondition(&conds, v1alpha1.ConditionReconciling)
		stalled := ready
		stalled.Type, stalled.Status = v1alpha1.ConditionStalled, metav1.ConditionTrue
		apimeta.SetStatusCondition(&conds, stalled)
	default:
		apimeta.RemoveStatusCondition(&conds, v1alpha1.ConditionReconciling)
		apimeta.RemoveStatusCondition(&conds, v1alpha1.ConditionStalled)
	}
	return conds
}

// reconciling marks conds' generation as being published, unless they say
// so already; it returns nil when nothing changes.
func reconciling(conds []metav1.Condition, generation int64, now time.Time) []metav1.Condition {
	if c := apimeta.FindStatusCondition(conds, v1alpha1.ConditionReconciling); c != nil &&
		c.Status == metav1.ConditionTrue && c.ObservedGeneration == generation {
		return nil
	}
	conds = append([]metav1.Condition(nil), conds...)
	apimeta.SetStatusCondition(&conds, metav1.Condition{Type: v1alpha1.ConditionReconciling, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ReasonPublishing, Message: fmt.Sprintf("generation %d is being published", generation),
		ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now)})
	return conds
}

// reconcilingMark is the mark the status writer puts on an object whose
// generation the outcome does not describe yet (reconciling), except on an
// object with no Ready condition: that one was never published, kstatus
// reads it as in progress already, and its first status write (Ready)
// follows its first publish; marking it first would double the writes of
// a cold start.
func reconcilingMark(conds []metav1.Condition, generation int64, now time.Time) []metav1.Condition {
	if apimeta.FindStatusCondition(conds, v1alpha1.ConditionReady) == nil {
		return nil
	}
	return reconciling(conds, generation, now)
}

// diagnosticsMessage names every failing rule and condition, as the engine
// reports them, up to a readable length.
func diagnosticsMessage(diags []engine.Diagnostic) string {
	var b strings.Builder
	for i, d := range diags {
		s := d.String()
		if i > 0 && b.Len()+len(s)+2 > maxConditionMessage {
			fmt.Fprintf(&b, "; and %d more", len(diags)-i)
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(s)
	}
	msg := b.String()
	if len(msg) > maxConditionMessage {
		msg = strings.ToValidUTF8(msg[:maxConditionMessage-3], "") + "..."
	}
	return msg
}

// readyChanged tells whether the Ready condition moved to another status,
// reason or message: only then is an event worth emitting.
func readyChanged(before, after []metav1.Condition) bool {
	a, b := apimeta.FindStatusCondition(before, v1alpha1.ConditionReady), apimeta.FindStatusCondition(after, v1alpha1.ConditionReady)
	if a == nil || b == nil {
		return a != b
	}
	return a.Status != b.Status || a.Reason != b.Reason || a.Message != b.Message
}
