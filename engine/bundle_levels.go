package engine

import (
	"cmp"
	"slices"
	"time"
)

// SchemaVersionLevels is the version of bundles that use the cluster level
// (ClusterPolicies), PolicyExceptions, shadow (Audit) policies or carry
// their namespace's labels: a sidecar older than these refuses the bundle
// (and keeps serving its last one) rather than reading a ClusterPolicy as a
// namespace's, an Audit policy as enforcing, or ignoring an exception.
const SchemaVersionLevels = 4

// The kinds a bundle's policy comes from: the namespace's Policies (written
// "" in the bundle, as every bundle before ClusterPolicy did) or a
// ClusterPolicy that selects the namespace.
const (
	KindPolicy        = "Policy"
	KindClusterPolicy = "ClusterPolicy"
)

// ModeAudit is a shadow policy's mode: it never changes a decision; what it
// would have decided is recorded beside it (Result.Shadow). Enforcing
// policies leave Mode "".
const ModeAudit = "Audit"

// Exception exempts agents from named rules of one policy until ExpiresAt
// (a PolicyException). It applies to a call when its agent_id is one of
// AgentIDs (compared as freezes compare, FoldKey) or the caller vouches
// for one of ServiceAccounts, and it has not expired on the evaluator's
// clock: every reader (sidecar, eval, test, replay) applies expiry here.
type Exception struct {
	// Name is the PolicyException's metadata.name.
	Name string `json:"name"`
	// PolicyKind is KindClusterPolicy, or "" for a Policy of the namespace.
	PolicyKind      string    `json:"policyKind,omitempty"`
	Policy          string    `json:"policy"`
	RuleIDs         []string  `json:"ruleIds"`
	AgentIDs        []string  `json:"agentIds,omitempty"`
	ServiceAccounts []string  `json:"serviceAccounts,omitempty"`
	ExpiresAt       time.Time `json:"expiresAt"`
}

// Expired reports whether e has ended at now: at its expiresAt exactly, as
// a freeze ends.
func (e *Exception) Expired(now time.Time) bool { return !now.Before(e.ExpiresAt) }

// Cluster tells whether p came from a ClusterPolicy.
func (p *Policy) Cluster() bool { return p.Kind == KindClusterPolicy }

// Audit tells whether p is a shadow policy.
func (p *Policy) Audit() bool { return p.Mode == ModeAudit }

// KindName is the kind p came from, as results and logs name it.
func (p *Policy) KindName() string {
	if p.Cluster() {
		return KindClusterPolicy
	}
	return KindPolicy
}

// usesLevels tells whether b needs SchemaVersionLevels.
func (b *Bundle) usesLevels() bool {
	if len(b.Exceptions) > 0 || b.NamespaceLabels != nil {
		return true
	}
	return slices.ContainsFunc(b.Policies, func(p Policy) bool { return p.Kind != "" || p.Mode != "" })
}

// compareLevel puts the cluster level before the namespace's.
func compareLevel(x, y *Policy) int {
	if x.Cluster() == y.Cluster() {
		return 0
	}
	if x.Cluster() {
		return -1
	}
	return 1
}

func sortExceptions(es []Exception) {
	slices.SortStableFunc(es, func(x, y Exception) int {
		return cmp.Or(cmp.Compare(x.Name, y.Name), cmp.Compare(x.PolicyKind, y.PolicyKind), cmp.Compare(x.Policy, y.Policy))
	})
}
