package bundlesource

import (
	"context"
	"reflect"
	"slices"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
)

// clusterFrozenSource watches ClusterFrozenAgents cluster-wide through the
// API, the cluster's kill switch, so that it reaches a --configmap sidecar
// with the operator down, as FrozenAgents do. The sidecar's RBAC needs
// get/list/watch on clusterfrozenagents, that kind only.
//
// Whether one applies is judged against the namespace's labels carried by
// the signed bundle being served (engine.Bundle.NamespaceLabels), not by
// reading the Namespace: the sidecar needs no read of Namespaces, and a
// namespace editor cannot relabel the bundle. Each new bundle is judged
// again. A bundle without labels (an operator older than
// ClusterFrozenAgent, an offline bundle) leaves the labels unknown: then
// every ClusterFrozenAgent applies, whatever its selector (fail closed),
// and /readyz and the log say so.
type clusterFrozenSource struct {
	config *rest.Config
}

// labelsUnknown is what /readyz says while the served bundle has no
// namespace labels.
const labelsUnknown = "unknown: the bundle served carries none (an operator older than ClusterFrozenAgent, or an offline bundle); every ClusterFrozenAgent applies, whatever its namespaceSelector"

// ClusterFrozenWatchStatus is what /readyz says about the ClusterFrozenAgent
// watch; nil when there is none (every source but the ConfigMap).
func (l *Loader) ClusterFrozenWatchStatus() map[string]any {
	st := l.clusterWatch.status()
	if st == nil {
		return nil
	}
	// Not under l.mu, which a reload holds while it compiles.
	judged := l.clusterJudged.Load()
	st["applied"] = judged.applied
	if judged.labelsUnknown {
		st["namespaceLabels"] = labelsUnknown
	}
	return st
}

// clusterJudgement is what /readyz says of the last judgement of the
// ClusterFrozenAgents: how many apply, and whether the served bundle's
// namespace labels were unknown.
type clusterJudgement struct {
	applied       int
	labelsUnknown bool
}

func (c *clusterFrozenSource) run(ctx context.Context, l *Loader) {
	watchFreezes(ctx, l, c.config, &l.clusterWatch, "clusterfrozenagents", "", &v1alpha1.ClusterFrozenAgent{},
		func(s cache.Store) { l.setClusterFreezes(clusterFrozenFromStore(s)) })
}

func clusterFrozenFromStore(store cache.Store) []*v1alpha1.ClusterFrozenAgent {
	objs := store.List()
	out := make([]*v1alpha1.ClusterFrozenAgent, 0, len(objs))
	for _, o := range objs {
		if cf, ok := o.(*v1alpha1.ClusterFrozenAgent); ok {
			out = append(out, cf)
		}
	}
	return out
}

// setClusterFreezes swaps in the ClusterFrozenAgents watched through the
// API and applies those that select the served bundle's namespace. Every
// sidecar of the cluster sees every ClusterFrozenAgent: one that changes
// nothing here (another namespace's) leaves the bundle served, and the MCP
// streams, alone.
func (l *Loader) setClusterFreezes(list []*v1alpha1.ClusterFrozenAgent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	before := l.clusterApplied
	l.clusterFrozen = list
	l.judgeClusterFreezes() // tells OnReportChanged when the names changed
	if reflect.DeepEqual(before, l.clusterApplied) {
		return
	}
	l.applyAPIFreezes("ClusterFrozenAgents")
}

// judgeClusterFreezes picks the watched ClusterFrozenAgents that apply to
// the namespace labels of the bundle served. Called with mu held.
func (l *Loader) judgeClusterFreezes() {
	l.clusterApplied, l.clusterAppliedNames = clusterFreezesFor(l.clusterFrozen, l.nsLabels)
	l.setFrozenNames(l.nsFrozenNames, l.clusterAppliedNames)
	l.metrics.APIClusterFrozenAgents.Set(float64(len(l.clusterApplied)))
	l.clusterJudged.Store(&clusterJudgement{applied: len(l.clusterApplied), labelsUnknown: l.labelsJudged && l.nsLabels == nil})
}

// clusterFreezesFor converts, as the operator's bundle builder does
// (bundle.Selects, bundle.FrozenAgent), the ClusterFrozenAgents whose
// namespaceSelector chooses a namespace with these labels; with nsLabels
// nil (unknown) every one applies. Expired ones are kept: evaluation
// checks expiry on the sidecar's clock. names are theirs, sorted, as a
// sidecar's Lease names them.
func clusterFreezesFor(list []*v1alpha1.ClusterFrozenAgent, nsLabels map[string]string) (applied []engine.FrozenAgent, names []string) {
	for _, cf := range list {
		if nsLabels != nil && !bundle.Selects(cf.Spec.NamespaceSelector, nsLabels) {
			continue
		}
		applied = append(applied, bundle.FrozenAgent(&v1alpha1.FrozenAgent{ObjectMeta: cf.ObjectMeta, Spec: cf.Spec.FrozenAgentSpec}))
		names = append(names, v1alpha1.FreezeName("ClusterFrozenAgent", cf.Name))
	}
	slices.Sort(names)
	return sortFrozen(applied), names
}

// bundleLabels takes the namespace labels of a bundle about to be served
// and judges the ClusterFrozenAgents again. Called with mu held.
func (l *Loader) bundleLabels(b *engine.Bundle) {
	if b.NamespaceLabels == nil && l.cfg.ConfigMap != "" && (l.nsLabels != nil || !l.labelsJudged) {
		l.log.Warn("the bundle carries no namespace labels; every ClusterFrozenAgent applies, whatever its namespaceSelector",
			"revision", b.Revision)
	}
	l.nsLabels, l.labelsJudged = b.NamespaceLabels, true
	l.judgeClusterFreezes()
}
