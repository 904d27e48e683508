package controllers

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
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
	var al v1alpha1.AgentList
	if err := c.List(ctx, &al, client.InNamespace(ns)); err != nil {
		return inputs{}, err
	}
	var ul v1alpha1.MCPUpstreamList
	if err := c.List(ctx, &ul, client.InNamespace(ns)); err != nil {
		return inputs{}, err
	}
	var nsObj corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: ns}, &nsObj); err != nil && !apierrors.IsNotFound(err) {
		return inputs{}, err
	}
	return inputs{
		registration: bundle.Registration{
			Agents:    slices.DeleteFunc(al.Items, func(a v1alpha1.Agent) bool { return a.DeletionTimestamp != nil }),
			Upstreams: slices.DeleteFunc(ul.Items, func(u v1alpha1.MCPUpstream) bool { return u.DeletionTimestamp != nil }),
			Labels:    nsObj.Labels,
		},
		namespace: ns,
		policies:  slices.DeleteFunc(pl.Items, func(p v1alpha1.Policy) bool { return p.DeletionTimestamp != nil }),
		frozen:    slices.DeleteFunc(fl.Items, func(f v1alpha1.FrozenAgent) bool { return f.DeletionTimestamp != nil }),
	}, nil
}
