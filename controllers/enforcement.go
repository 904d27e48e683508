package controllers

import (
	"fmt"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
)

// sidecar is one live sidecar of a namespace and what its Lease says; a nil
// report means it does not report (no Lease, one not renewed within its
// duration, or one that does not parse).
type sidecar struct {
	pod    string
	report *v1alpha1.SidecarReport
}

// sidecarsOf is the namespace's live sidecars at now, sorted by Pod name:
// the injected Pods that are not finished or deleting, and any other Pod
// whose sidecar holds a live Lease. next is when the first live Lease
// expires (zero if none): with no event then, the status must be looked at
// again.
func sidecarsOf(pods []corev1.Pod, leases []coordinationv1.Lease, now time.Time) (live []sidecar, next time.Time) {
	type podState struct {
		uid  string
		gone bool
	}
	known := make(map[string]podState, len(pods))
	for i := range pods {
		p := &pods[i]
		gone := p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		known[p.Name] = podState{uid: string(p.UID), gone: gone}
		if !gone {
			live = append(live, sidecar{pod: p.Name})
		}
	}
	for i := range leases {
		l := &leases[i]
		if l.DeletionTimestamp != nil || l.Spec.RenewTime == nil {
			continue
		}
		var duration int32
		if l.Spec.LeaseDurationSeconds != nil {
			duration = *l.Spec.LeaseDurationSeconds
		}
		if !v1alpha1.LeaseLive(l.Spec.RenewTime.Time, duration, now) {
			continue
		}
		pod, isKnown := known[l.Name]
		if isKnown && (pod.gone || !ownedBy(l, pod.uid)) {
			// The Pod is going, or the Lease is a former Pod's of the
			// same name (a StatefulSet's): it does not speak for this one.
			continue
		}
		if expires := leaseExpiry(l.Spec.RenewTime.Time, duration); next.IsZero() || expires.Before(next) {
			next = expires
		}
		// A Lease that does not parse says nothing: its sidecar is
		// unreporting.
		var r *v1alpha1.SidecarReport
		if report, err := v1alpha1.ParseSidecarReport(l.Annotations); err == nil {
			r = &report
		}
		if i := slices.IndexFunc(live, func(s sidecar) bool { return s.pod == l.Name }); i >= 0 {
			live[i].report = r
		} else {
			live = append(live, sidecar{pod: l.Name, report: r})
		}
	}
	slices.SortFunc(live, func(a, b sidecar) int { return strings.Compare(a.pod, b.pod) })
	return live, next
}

// ownedBy tells whether the Lease names the Pod of that UID as its owner.
// A Lease without an owner reference to a Pod is taken at its name.
func ownedBy(l *coordinationv1.Lease, uid string) bool {
	for _, ref := range l.OwnerReferences {
		if ref.Kind == "Pod" && ref.APIVersion == "v1" {
			return string(ref.UID) == uid
		}
	}
	return true
}

func leaseExpiry(renew time.Time, durationSeconds int32) time.Time {
	if durationSeconds <= 0 {
		durationSeconds = v1alpha1.SidecarLeaseDurationSeconds
	}
	return renew.Add(time.Duration(durationSeconds) * time.Second)
}

// tally counts sidecars by what they serve of one object, and names the
// first (by name) of each kind that is not current. Tallies of several
// namespaces add up (a cluster-scoped object's).
type tally struct {
	sidecars, current, stale, refusing, unreporting int32
	firstStale, staleRevision                       string
	firstRefusing, refusedRevision, refusedReason   string
	firstUnreporting                                string
}

// tallyOf counts sidecars for an object; current says whether a report
// shows it served. prefix qualifies Pod names ("ns/" for a cluster-scoped
// object's, "" otherwise).
func tallyOf(sidecars []sidecar, current func(v1alpha1.SidecarReport) bool, prefix string) tally {
	var t tally
	for _, s := range sidecars {
		t.sidecars++
		switch r := s.report; {
		case r == nil:
			t.unreporting++
			if t.firstUnreporting == "" {
				t.firstUnreporting = prefix + s.pod
			}
		case current(*r):
			t.current++
		case r.RefusedReason != "" || r.RefusedRevision != "":
			t.refusing++
			if t.firstRefusing == "" {
				t.firstRefusing, t.refusedRevision, t.refusedReason = prefix+s.pod, r.RefusedRevision, r.RefusedReason
			}
		default:
			t.stale++
			if t.firstStale == "" {
				t.firstStale, t.staleRevision = prefix+s.pod, r.Revision
			}
		}
	}
	return t
}

// add sums o into t; the first Pods named stay t's unless t has none.
func (t *tally) add(o tally) {
	t.sidecars += o.sidecars
	t.current += o.current
	t.stale += o.stale
	t.refusing += o.refusing
	t.unreporting += o.unreporting
	if t.firstStale == "" {
		t.firstStale, t.staleRevision = o.firstStale, o.staleRevision
	}
	if t.firstRefusing == "" {
		t.firstRefusing, t.refusedRevision, t.refusedReason = o.firstRefusing, o.refusedRevision, o.refusedReason
	}
	if t.firstUnreporting == "" {
		t.firstUnreporting = o.firstUnreporting
	}
}

// servesGeneration is the current test of a Policy (or any object the
// bundle carries): the served revision contains its generation.
func servesGeneration(history revisionsOf, obj metav1.Object) func(v1alpha1.SidecarReport) bool {
	return func(r v1alpha1.SidecarReport) bool {
		return history.contains(r.Revision, obj.GetUID(), obj.GetGeneration())
	}
}

// appliesFreeze is the current test of a freeze: the Lease names it (or,
// its list truncated, has the digest of every freeze it should apply), or
// the served revision contains its generation.
func appliesFreeze(history revisionsOf, obj metav1.Object, name string) func(v1alpha1.SidecarReport) bool {
	serves := servesGeneration(history, obj)
	return func(r v1alpha1.SidecarReport) bool {
		return r.Applies(name, history.freezeDigest) || serves(r)
	}
}

// expectedFreezes is the FreezeDigest of the freezes a namespace's sidecars
// should apply: its FrozenAgents and the ClusterFrozenAgents that select
// it, expired ones left out (the bundle leaves them out too).
func expectedFreezes(in inputs, now time.Time) string {
	names := make([]string, 0, len(in.frozen)+len(in.clusterFrozen))
	for i := range in.frozen {
		if !bundle.FrozenAgent(&in.frozen[i]).Expired(now) {
			names = append(names, v1alpha1.FreezeName("FrozenAgent", in.frozen[i].Name))
		}
	}
	for i := range in.clusterFrozen {
		cf := &in.clusterFrozen[i]
		if !bundle.FrozenAgent(&v1alpha1.FrozenAgent{Spec: cf.Spec.FrozenAgentSpec}).Expired(now) {
			names = append(names, v1alpha1.FreezeName("ClusterFrozenAgent", cf.Name))
		}
	}
	return v1alpha1.FreezeDigest(names)
}

// withEnforcement sets the Enforced condition of an object at generation
// from its tally, on a copy of conds whose Ready condition is already the
// one being written, and returns the enforcement status to write with it.
// where says where the sidecars are ("the namespace", "the 3 namespaces
// it selects").
func withEnforcement(conds []metav1.Condition, generation int64, t tally, where string, now time.Time) (*v1alpha1.EnforcementStatus, []metav1.Condition) {
	st := &v1alpha1.EnforcementStatus{Sidecars: t.sidecars, Current: t.current, Stale: t.stale,
		Refusing: t.refusing, Unreporting: t.unreporting, Summary: v1alpha1.EnforcementSummary(t.current, t.sidecars)}
	cond := metav1.Condition{Type: v1alpha1.ConditionEnforced, ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(now)}
	ready := apimeta.FindStatusCondition(conds, v1alpha1.ConditionReady)
	switch {
	case ready == nil || ready.Status != metav1.ConditionTrue || ready.ObservedGeneration != generation:
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonNotPublished
		cond.Message = fmt.Sprintf("generation %d is not live in a published bundle (see Ready)", generation)
	case t.sidecars == 0:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.ReasonNoSidecars
		cond.Message = fmt.Sprintf("no live sidecar in %s: no injected Pod and no sidecar Lease", where)
	case t.refusing > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonSidecarRefusing
		cond.Message = fmt.Sprintf("%d of %d sidecars refused the bundle that carries generation %d: Pod %s refused revision %q: %s",
			t.refusing, t.sidecars, generation, t.firstRefusing, t.refusedRevision, t.refusedReason)
	case t.stale > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonSidecarsStale
		cond.Message = fmt.Sprintf("%d of %d sidecars serve a bundle without generation %d: Pod %s serves revision %q",
			t.stale, t.sidecars, generation, t.firstStale, t.staleRevision)
	case t.unreporting > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ReasonSidecarsUnreporting
		cond.Message = fmt.Sprintf("%d of %d sidecars do not report what they serve (no Lease renewed within its duration): Pod %s",
			t.unreporting, t.sidecars, t.firstUnreporting)
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.ReasonAllSidecarsCurrent
		cond.Message = fmt.Sprintf("all %d live sidecars in %s serve generation %d", t.sidecars, where, generation)
	}
	if len(cond.Message) > maxConditionMessage {
		cond.Message = strings.ToValidUTF8(cond.Message[:maxConditionMessage-3], "") + "..."
	}
	conds = append([]metav1.Condition(nil), conds...)
	apimeta.SetStatusCondition(&conds, cond)
	return st, conds
}
