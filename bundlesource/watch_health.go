package bundlesource

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// frozenWatch is what /readyz, the log and the metrics say about one of the
// freeze watches of a --configmap sidecar (FrozenAgents of its namespace,
// ClusterFrozenAgents of the cluster).
type frozenWatch struct {
	kind     string // as logs name it: "FrozenAgents", "ClusterFrozenAgents"
	upGauge  prometheus.Gauge
	failures prometheus.Counter

	mu      sync.Mutex
	enabled bool
	up      bool
	err     string
	since   time.Time
}

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
			"serving": "the bundle's freezes and the " + w.kind + " last seen"}
	}
}

// set records what the last list or watch call answered, and logs, counts
// and exposes a failure.
func (w *frozenWatch) set(l *Loader, err error) {
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
		w.upGauge.Set(1)
		l.log.Info("watching " + w.kind + " through the API: freezes apply without the operator")
	case err != nil:
		w.upGauge.Set(0)
		w.failures.Inc()
		if err.Error() != wasErr || wasUp {
			l.log.Error("watching "+w.kind+" failed; the bundle's freezes and the "+w.kind+" last seen keep applying, retrying with backoff",
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

// watchFreezes runs an informer on one toolgate.dev resource (in namespace,
// or cluster-wide for ""), calling publish with its store after every
// event, until ctx ends. Its health is what its list and watch calls
// answer (a reflector reports errors to the error handler but not its
// recovery), recorded in w.
func watchFreezes(ctx context.Context, l *Loader, config *rest.Config, w *frozenWatch, resource, namespace string,
	obj runtime.Object, publish func(cache.Store)) {
	where := "the cluster"
	if namespace != "" {
		where = namespace
	}
	describe := func(err error) error {
		if err == nil {
			return nil
		}
		return fmt.Errorf("%s in %s: %w", resource, where, err)
	}
	cfg := rest.CopyConfig(config)
	// Custom resources are served as JSON only.
	cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
	cfg.GroupVersion = &v1alpha1.GroupVersion
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(newFrozenScheme()).WithoutConversion()
	rc, err := rest.RESTClientFor(cfg)
	if err != nil {
		w.set(l, fmt.Errorf("%s client: %w", resource, err))
		return // the bundle path keeps working
	}
	inner := cache.NewFilteredListWatchFromClient(rc, resource, namespace, func(*metav1.ListOptions) {})
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			obj, err := inner.ListWithContextFunc(ctx, o)
			w.set(l, describe(err))
			return obj, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			wi, err := inner.WatchFuncWithContext(ctx, o)
			w.set(l, describe(err))
			return wi, err
		},
	}
	informer := cache.NewSharedIndexInformerWithOptions(lw, obj, cache.SharedIndexInformerOptions{})
	_ = informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		w.set(l, describe(err))
	})
	store := informer.GetStore()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { publish(store) },
		UpdateFunc: func(any, any) { publish(store) },
		DeleteFunc: func(any) { publish(store) },
	}); err != nil {
		w.set(l, err)
		return
	}
	l.log.Info("watching "+w.kind, "namespace", where)
	informer.RunWithContext(ctx)
}
