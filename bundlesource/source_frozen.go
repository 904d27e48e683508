package bundlesource

import (
	"context"
	"slices"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
)

// frozenSource watches the FrozenAgents of the sidecar's namespace through
// the API and applies them at once, merged with the bundle's: the kill
// switch then reaches a --configmap sidecar without the operator (stopped,
// failing over, or publishing a bundle this sidecar refuses). The sidecar's
// RBAC needs get/list/watch on frozenagents in that namespace only.
//
// A watch that fails (RBAC missing, API server down) is reported in the
// log, the toolgate_sidecar_frozen_watch_up metric and /readyz; the
// reflector retries with backoff, the bundle's freezes keep applying, and
// so do the FrozenAgents last seen (a stale freeze fails closed).
type frozenSource struct {
	namespace string
	config    *rest.Config
}

// FrozenWatchStatus is what /readyz says about the FrozenAgent watch; nil
// when there is none (every source but the ConfigMap).
func (l *Loader) FrozenWatchStatus() map[string]any { return l.frozenWatch.status() }

func (f *frozenSource) run(ctx context.Context, l *Loader) {
	watchFreezes(ctx, l, f.config, &l.frozenWatch, "frozenagents", f.namespace, &v1alpha1.FrozenAgent{},
		func(s cache.Store) { l.setNamespaceFreezes(frozenFromStore(s), frozenNames(s)) })
}

// frozenFromStore converts the watched FrozenAgents the way the operator's
// bundle builder does (bundle.FrozenAgent), in a stable order. Expired ones
// are kept: evaluation checks expiry on the sidecar's clock.
func frozenFromStore(store cache.Store) []engine.FrozenAgent {
	objs := store.List()
	out := make([]engine.FrozenAgent, 0, len(objs))
	for _, o := range objs {
		if fa, ok := o.(*v1alpha1.FrozenAgent); ok {
			out = append(out, bundle.FrozenAgent(fa))
		}
	}
	return sortFrozen(out)
}

// frozenNames names the watched FrozenAgents as a sidecar's Lease does.
func frozenNames(store cache.Store) []string {
	var names []string
	for _, o := range store.List() {
		if fa, ok := o.(*v1alpha1.FrozenAgent); ok {
			names = append(names, v1alpha1.FreezeName("FrozenAgent", fa.Name))
		}
	}
	return names
}

func sortFrozen(list []engine.FrozenAgent) []engine.FrozenAgent {
	b := engine.Bundle{FrozenAgents: list}
	b.Sort()
	return slices.Clip(b.FrozenAgents)
}

// setNamespaceFreezes swaps in the FrozenAgents watched through the API.
func (l *Loader) setNamespaceFreezes(list []engine.FrozenAgent, names []string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.nsFrozen = list
	l.setFrozenNames(names, l.clusterAppliedNames)
	l.metrics.APIFrozenAgents.Set(float64(len(list)))
	l.applyAPIFreezes("FrozenAgents")
}

// applyAPIFreezes rebuilds the freeze index of the bundle served from the
// bundle's own freezes and those watched through the API: the compiled
// policies stay. Called with mu held.
func (l *Loader) applyAPIFreezes(what string) {
	cur := l.d.State()
	if cur.Compiled == nil {
		return // no bundle: every decision is deny NO_POLICIES already
	}
	list := l.apiFreezes()
	l.d.Serve(cur.Compiled.WithFrozen(list), cur.Revision, cur.Origin, cur.LoadedAt)
	if l.cfg.OnFreezesChanged != nil {
		l.cfg.OnFreezesChanged()
	}
	l.log.Info(what+" applied from the API", "count", len(list))
}

// apiFreezes are the freezes watched through the API that apply to the
// bundle served: the namespace's FrozenAgents and the ClusterFrozenAgents
// that select it. Called with mu held.
func (l *Loader) apiFreezes() []engine.FrozenAgent {
	if len(l.clusterApplied) == 0 {
		return l.nsFrozen
	}
	return sortFrozen(append(slices.Clip(l.nsFrozen), l.clusterApplied...))
}
