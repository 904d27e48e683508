package bundlesource

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
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

// frozenWatch is what /readyz and the metrics say about the FrozenAgent
// watch.
type frozenWatch struct {
	mu      sync.Mutex
	enabled bool
	up      bool
	err     string
	since   time.Time
}

// FrozenWatchStatus is what /readyz says about the FrozenAgent watch; nil
// when there is none (every source but the ConfigMap).
func (l *Loader) FrozenWatchStatus() map[string]any { return l.frozenWatch.status() }

func (w *frozenWatch) status() map[string]any {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case !w.enabled:
		return nil
	case w.up:
		return map[string]any{"watching": true}
	case w.err == "":
		return map[string]any{"watching": false, "error": "not connected yet"}
	default:
		return map[string]any{"watching": false, "error": w.err, "since": w.since.UTC().Format(time.RFC3339),
			"serving": "the bundle's freezes and the FrozenAgents last seen"}
	}
}

// setFrozenWatch records what the last list or watch call answered, and
// logs, counts and exposes a failure.
func (l *Loader) setFrozenWatch(err error) {
	w := &l.frozenWatch
	w.mu.Lock()
	wasUp, wasErr := w.up, w.err
	w.enabled = true
	if err == nil {
		w.up, w.err = true, ""
	} else {
		w.up, w.err = false, err.Error()
	}
	if w.up != wasUp || w.err != wasErr {
		w.since = time.Now()
	}
	w.mu.Unlock()
	switch {
	case err == nil && !wasUp:
		l.metrics.FrozenWatchUp.Set(1)
		l.log.Info("watching FrozenAgents through the API: freezes apply without the operator")
	case err != nil:
		l.metrics.FrozenWatchUp.Set(0)
		l.metrics.FrozenWatchFailures.Inc()
		if w.err != wasErr || wasUp {
			l.log.Error("watching FrozenAgents failed; the bundle's freezes and the FrozenAgents last seen keep applying, retrying with backoff",
				"err", err)
		}
	}
}

func newFrozenScheme() *runtime.Scheme {
	sch := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(sch); err != nil {
		panic(err) // static registration; cannot fail
	}
	return sch
}

func (f *frozenSource) run(ctx context.Context, l *Loader) error {
	cfg := rest.CopyConfig(f.config)
	// Custom resources are served as JSON only.
	cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
	cfg.GroupVersion = &v1alpha1.GroupVersion
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(newFrozenScheme()).WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		l.setFrozenWatch(fmt.Errorf("frozenagents client: %w", err))
		return nil // the bundle path keeps working
	}
	inner := cache.NewFilteredListWatchFromClient(rc, "frozenagents", f.namespace, func(*metav1.ListOptions) {})
	// The watch's health is what its calls answer: a reflector reports
	// errors to the error handler but not its recovery.
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			obj, err := inner.ListWithContextFunc(ctx, o)
			l.setFrozenWatch(describeWatchErr(f.namespace, err))
			return obj, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := inner.WatchFuncWithContext(ctx, o)
			l.setFrozenWatch(describeWatchErr(f.namespace, err))
			return w, err
		},
	}
	informer := cache.NewSharedIndexInformerWithOptions(lw, &v1alpha1.FrozenAgent{}, cache.SharedIndexInformerOptions{})
	_ = informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		l.setFrozenWatch(describeWatchErr(f.namespace, err))
	})
	publish := func() { l.setAPIFreezes(frozenFromStore(informer.GetStore())) }
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { publish() },
		UpdateFunc: func(any, any) { publish() },
		DeleteFunc: func(any) { publish() },
	}); err != nil {
		l.setFrozenWatch(err)
		return nil
	}
	l.log.Info("watching FrozenAgents", "namespace", f.namespace)
	informer.RunWithContext(ctx)
	return nil
}

func describeWatchErr(namespace string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("frozenagents in %s: %w", namespace, err)
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
	b := engine.Bundle{FrozenAgents: out}
	b.Sort()
	return slices.Clip(b.FrozenAgents)
}

// setAPIFreezes swaps in the FrozenAgents watched through the API: the
// bundle's compiled policies stay, only the freeze index is rebuilt.
func (l *Loader) setAPIFreezes(list []engine.FrozenAgent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.apiFrozen = list
	l.metrics.APIFrozenAgents.Set(float64(len(list)))
	cur := l.d.State()
	if cur.Compiled == nil {
		return // no bundle: every decision is deny NO_POLICIES already
	}
	l.d.Serve(cur.Compiled.WithFrozen(list), cur.Revision, cur.Origin, cur.LoadedAt)
	if l.cfg.OnFreezesChanged != nil {
		l.cfg.OnFreezesChanged()
	}
	l.log.Info("FrozenAgents applied from the API", "count", len(list))
}
