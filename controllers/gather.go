package controllers

import (
	"context"
	"slices"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/internal/registration"
)

// inputs are a namespace's live objects, in list order.
type inputs struct {
	namespace    string
	policies     []v1alpha1.Policy
	frozen       []v1alpha1.FrozenAgent
	registration bundle.Registration
}

// empty: nothing to publish. A namespace that registers agents but has no
// Policy gets a bundle all the same, so its sidecars know who they are
// (and deny NO_POLICIES as they would without one).
func (in inputs) empty() bool {
	return len(in.policies) == 0 && len(in.frozen) == 0 && len(in.registration.Agents) == 0 && len(in.registration.Upstreams) == 0
}

// gather lists the namespace's objects from the cache, leaving out those
// being deleted: they no longer apply.
func gather(ctx context.Context, c client.Reader, ns string) (inputs, error) {
	var pl v1alpha1.PolicyList
	if err := c.List(ctx, &pl, client.InNamespace(ns)); err != nil {
		return inputs{}, err
	}
	var fl v1alpha1.FrozenAgentList
	if err := c.List(ctx, &fl, client.InNamespace(ns)); err != nil {
		return inputs{}, err
	}
	reg, err := registration.Read(ctx, c, ns)
	if err != nil {
		return inputs{}, err
	}
	return inputs{
		registration: reg,
		namespace:    ns,
		policies:     slices.DeleteFunc(pl.Items, func(p v1alpha1.Policy) bool { return p.DeletionTimestamp != nil }),
		frozen:       slices.DeleteFunc(fl.Items, func(f v1alpha1.FrozenAgent) bool { return f.DeletionTimestamp != nil }),
	}, nil
}
