// Package registration reads what a namespace says about who its agents
// are (its Agents, MCPUpstreams and labels) from the API: the one reading
// the operator publishes from and the injector admits Pods by.
package registration

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
)

// Read lists the namespace's Agents and MCPUpstreams through c, leaving out
// those being deleted (they no longer apply), with the Namespace's labels
// (none when it is gone).
func Read(ctx context.Context, c client.Reader, namespace string) (bundle.Registration, error) {
	var reg bundle.Registration
	var ns corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: namespace}, &ns); err != nil && !apierrors.IsNotFound(err) {
		return reg, fmt.Errorf("reading namespace %s: %w", namespace, err)
	}
	reg.Labels = ns.Labels
	var agents v1alpha1.AgentList
	if err := c.List(ctx, &agents, client.InNamespace(namespace)); err != nil {
		return reg, fmt.Errorf("listing the Agents of %s: %w", namespace, err)
	}
	var upstreams v1alpha1.MCPUpstreamList
	if err := c.List(ctx, &upstreams, client.InNamespace(namespace)); err != nil {
		return reg, fmt.Errorf("listing the MCPUpstreams of %s: %w", namespace, err)
	}
	reg.Agents = slices.DeleteFunc(agents.Items, func(a v1alpha1.Agent) bool { return a.DeletionTimestamp != nil })
	reg.Upstreams = slices.DeleteFunc(upstreams.Items, func(u v1alpha1.MCPUpstream) bool { return u.DeletionTimestamp != nil })
	return reg, nil
}
