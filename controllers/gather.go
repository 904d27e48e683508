package controllers

import (
	"context"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/internal/registration"
)

// inputs are a namespace's live objects, in list order, and the
// cluster-scoped ones whose namespaceSelector chooses it.
type inputs struct {
	namespace       string
	policies        []v1alpha1.Policy
	frozen          []v1alpha1.FrozenAgent
	exceptions      []v1alpha1.PolicyException
	clusterPolicies []v1alpha1.ClusterPolicy
	clusterFrozen   []v1alpha1.ClusterFrozenAgent
	// clusterKinds: some ClusterPolicy or ClusterFrozenAgent exists,
	// selecting this namespace or not.
	clusterKinds bool
	registration bundle.Registration
}

// empty: nothing to publish. A namespace that registers agents but has no
// Policy gets a bundle all the same, so its sidecars know who they are
// (and deny NO_POLICIES as they would without one); so does one that only
// a ClusterPolicy or ClusterFrozenAgent selects (decided by the cluster
// level alone), and one with PolicyExceptions (whose status then says what
// they exempt from).
func (in inputs) empty() bool {
	return len(in.policies) == 0 && len(in.frozen) == 0 && len(in.registration.Agents) == 0 && len(in.registration.Upstreams) == 0 &&
		len(in.exceptions) == 0 && len(in.clusterPolicies) == 0 && len(in.clusterFrozen) == 0
}

// sources are what bundle.BuildSources builds the namespace's bundle from.
// The namespace's labels go into the bundle (for sidecars to judge
// ClusterFrozenAgents' selectors) only once the cluster has a ClusterPolicy
// or ClusterFrozenAgent: they make it schema version 4, which sidecars
// older than these kinds refuse, and until then a cluster that uses none of
// them keeps its bundles as they were, so a rolling upgrade keeps feeding
// old sidecars. A sidecar serving a bundle without labels applies every
// ClusterFrozenAgent (fail closed) until the operator publishes them.
func (in inputs) sources() bundle.Sources {
	s := bundle.Sources{Policies: in.policies, FrozenAgents: in.frozen,
		Exceptions: in.exceptions, ClusterPolicies: in.clusterPolicies, ClusterFrozenAgents: in.clusterFrozen}
	if in.clusterKinds {
		s.Labels = in.registration.Labels
	}
	return s
}

// gather lists the namespace's objects from the cache, leaving out those
// being deleted: they no longer apply. Of the cluster-scoped kinds it keeps
// those that select the namespace by its labels (bundle.Selects).
func gather(ctx context.Context, c client.Reader, ns string) (inputs, error) {
	var pl v1alpha1.PolicyList
	if err := c.List(ctx, &pl, client.InNamespace(ns)); err != nil {
		return inputs{}, err
	}
	var fl v1alpha1.FrozenAgentList
	if err := c.List(ctx, &fl, client.InNamespace(ns)); err != nil {
		return inputs{}, err
	}
	var el v1alpha1.PolicyExceptionList
	if err := c.List(ctx, &el, client.InNamespace(ns)); err != nil {
		return inputs{}, err
	}
	reg, err := registration.Read(ctx, c, ns)
	if err != nil {
		return inputs{}, err
	}
	// A Namespace always carries kubernetes.io/metadata.name: no labels
	// means it is gone, and no cluster-scoped object selects it.
	var cpl v1alpha1.ClusterPolicyList
	var cfl v1alpha1.ClusterFrozenAgentList
	if reg.Labels != nil {
		if err := c.List(ctx, &cpl); err != nil {
			return inputs{}, err
		}
		if err := c.List(ctx, &cfl); err != nil {
			return inputs{}, err
		}
	}
	return inputs{
		registration: reg,
		namespace:    ns,
		clusterKinds: len(cpl.Items)+len(cfl.Items) > 0,
		policies:     slices.DeleteFunc(pl.Items, func(p v1alpha1.Policy) bool { return p.DeletionTimestamp != nil }),
		frozen:       slices.DeleteFunc(fl.Items, func(f v1alpha1.FrozenAgent) bool { return f.DeletionTimestamp != nil }),
		exceptions:   slices.DeleteFunc(el.Items, func(e v1alpha1.PolicyException) bool { return e.DeletionTimestamp != nil }),
		clusterPolicies: slices.DeleteFunc(cpl.Items, func(p v1alpha1.ClusterPolicy) bool {
			return p.DeletionTimestamp != nil || !bundle.Selects(p.Spec.NamespaceSelector, reg.Labels)
		}),
		clusterFrozen: slices.DeleteFunc(cfl.Items, func(f v1alpha1.ClusterFrozenAgent) bool {
			return f.DeletionTimestamp != nil || !bundle.Selects(f.Spec.NamespaceSelector, reg.Labels)
		}),
	}, nil
}
