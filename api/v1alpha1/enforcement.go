package v1alpha1

import "fmt"

// EnforcementStatus counts the sidecars that should enforce an object and
// what each of them reports serving (its Lease, sidecar_lease.go). Every
// live sidecar is counted once, in exactly one of current, stale, refusing
// and unreporting.
type EnforcementStatus struct {
	// sidecars is the number of live sidecars the object applies to: the
	// namespace's injected Pods that are not finished or deleting, and any
	// other Pod whose sidecar reports through a Lease.
	Sidecars int32 `json:"sidecars"`
	// current sidecars serve a bundle that contains this object's
	// generation (for a FrozenAgent: apply it).
	Current int32 `json:"current"`
	// stale sidecars report an older bundle.
	// +optional
	Stale int32 `json:"stale,omitempty"`
	// refusing sidecars report that they refused the namespace's latest
	// bundle (bad signature, schema skew, too large) and serve an older one.
	// +optional
	Refusing int32 `json:"refusing,omitempty"`
	// unreporting sidecars have no Lease, or one not renewed within its
	// duration: not started yet, hung, or reading a mounted file rather
	// than the API.
	// +optional
	Unreporting int32 `json:"unreporting,omitempty"`
	// summary is "current/sidecars", for kubectl get's ENFORCED column.
	// +optional
	Summary string `json:"summary,omitempty"`
}

// EnforcementSummary is what EnforcementStatus.Summary holds.
func EnforcementSummary(current, sidecars int32) string {
	return fmt.Sprintf("%d/%d", current, sidecars)
}

// The Enforced condition, on Policies, FrozenAgents, ClusterPolicies and
// ClusterFrozenAgents. Ready says the operator published the object;
// Enforced says the sidecars serve it. It is not a kstatus condition: a
// namespace whose agents are down is no reason to hold a rollout.
const (
	// ConditionEnforced is True when every live sidecar the object applies
	// to serves a bundle containing the object's current generation (a
	// FrozenAgent: applies it), False otherwise, naming the first Pod that
	// does not.
	ConditionEnforced = "Enforced"

	// ReasonAllSidecarsCurrent (Enforced=True): every live sidecar serves it.
	ReasonAllSidecarsCurrent = "AllSidecarsCurrent"
	// ReasonNoSidecars (Enforced=True): no live sidecar the object applies
	// to; there is nothing to wait for.
	ReasonNoSidecars = "NoSidecars"
	// ReasonNotPublished (Enforced=False): the object's current generation
	// is in no published bundle yet (see Ready).
	ReasonNotPublished = "NotPublished"
	// ReasonSidecarRefusing (Enforced=False): a sidecar refused the bundle
	// that carries the object; the message names the Pod and its reason.
	ReasonSidecarRefusing = "SidecarRefusing"
	// ReasonSidecarsStale (Enforced=False): a sidecar serves an older
	// bundle (a kubelet or watch that lags).
	ReasonSidecarsStale = "SidecarsStale"
	// ReasonSidecarsUnreporting (Enforced=False): a live sidecar has no
	// current Lease, so what it serves is unknown.
	ReasonSidecarsUnreporting = "SidecarsUnreporting"
)
