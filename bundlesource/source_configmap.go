package bundlesource

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/toolgate/toolgate/bundle"
)

// configMapSource watches the one bundle ConfigMap through the API. The
// informer's list and watch carry a metadata.name field selector, so the
// sidecar's RBAC needs only get/list/watch on that ConfigMap's namespace and
// sees no other ConfigMap. The reflector retries with backoff while the API
// server is unreachable; the bundle last loaded keeps serving meanwhile.
type configMapSource struct {
	namespace, name string
	config          *rest.Config

	mu     sync.Mutex // orders event handling against the post-sync check
	seen   bool
	chunks chunkReader // the parts of a chunked bundle (source_chunks.go)
}

func newConfigMapSource(ref, kubeconfig string) (*configMapSource, error) {
	ns, name, err := ParseConfigMapRef(ref)
	if err != nil {
		return nil, err
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("--configmap needs API access (--kubeconfig, KUBECONFIG or in-cluster): %w", err)
	}
	cfg.UserAgent = "toolgate-sidecar"
	// Protobuf: a large bundle ConfigMap decodes faster and smaller.
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	return &configMapSource{namespace: ns, name: name, config: cfg}, nil
}

// API is the API access and namespace of the ConfigMap: where the
// sidecar's ApprovalRequests live.
func (c *configMapSource) API() (*rest.Config, string) { return c.config, c.namespace }

// Run watches the ConfigMap, the FrozenAgents of its namespace and the
// ClusterFrozenAgents, until ctx ends.
func (c *configMapSource) Run(ctx context.Context, l *Loader) error {
	// Only the core/v1 client: the full clientset and the informer factory
	// would link every API group into the sidecar binary.
	client, err := corev1client.NewForConfig(c.config)
	if err != nil {
		return fmt.Errorf("configmap: %w", err)
	}
	c.chunks.ctx, c.chunks.parts = ctx, client.ConfigMaps(c.namespace)
	byName := fields.OneTermEqualSelector("metadata.name", c.name).String()
	lw := cache.NewFilteredListWatchFromClient(client.RESTClient(), "configmaps", c.namespace,
		func(o *metav1.ListOptions) { o.FieldSelector = byName })
	informer := cache.NewSharedIndexInformerWithOptions(lw, &corev1.ConfigMap{}, cache.SharedIndexInformerOptions{})
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.apply(l, obj) },
		UpdateFunc: func(old, obj any) {
			if o, n := old.(*corev1.ConfigMap), obj.(*corev1.ConfigMap); o.ResourceVersion != n.ResourceVersion {
				c.apply(l, obj)
			}
		},
		// The operator deletes the bundle when the namespace has no Policy
		// and no FrozenAgent left: that is "no policies", so deny.
		DeleteFunc: func(any) {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.seen = false
			c.chunks.latest = "" // a pending retry of its parts stops
			l.Unload(OriginConfigMap, fmt.Sprintf("ConfigMap %s/%s was deleted", c.namespace, c.name))
		},
	})
	if err != nil {
		return fmt.Errorf("configmap: %w", err)
	}
	l.log.Info("watching the bundle ConfigMap", "namespace", c.namespace, "name", c.name, "server", c.config.Host)
	done := make(chan struct{})
	go func() {
		defer close(done)
		informer.RunWithContext(ctx)
	}()
	// Who the sidecar is, from the API server.
	learnDone := make(chan struct{})
	go func() {
		defer close(learnDone)
		l.learnServiceAccount(ctx, c.config, c.namespace)
	}()
	defer func() { <-learnDone }()
	// FrozenAgents of the same namespace, straight from the API.
	frozenDone := make(chan struct{})
	go func() {
		defer close(frozenDone)
		(&frozenSource{namespace: c.namespace, config: c.config}).run(ctx, l)
	}()
	defer func() { <-frozenDone }()
	// And the cluster's kill switch, ClusterFrozenAgents.
	clusterDone := make(chan struct{})
	go func() {
		defer close(clusterDone)
		(&clusterFrozenSource{config: c.config}).run(ctx, l)
	}()
	defer func() { <-clusterDone }()
	if cache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		c.afterSync(l)
	}
	<-ctx.Done()
	<-done
	return nil
}

// afterSync handles a ConfigMap that did not exist at the first list: a
// bundle served from the cache is then out of date (it was deleted while
// this sidecar was down), so it is unloaded.
func (c *configMapSource) afterSync(l *Loader) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.seen {
		l.Unload(OriginConfigMap, fmt.Sprintf("ConfigMap %s/%s does not exist", c.namespace, c.name))
	}
}

func (c *configMapSource) apply(l *Loader, obj any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.applyLocked(l, obj)
}

func (c *configMapSource) applyLocked(l *Loader, obj any) {
	c.seen = true
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		l.reject(OriginConfigMap, fmt.Errorf("unexpected object %T", obj))
		return
	}
	if bundle.IsChunked(cm) && c.chunks.parts != nil {
		_ = c.chunks.loadChunked(l, cm, func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.chunks.latest == cm.ResourceVersion { // no newer event since
				c.applyLocked(l, cm)
			}
		})
		return
	}
	c.chunks.latest = cm.ResourceVersion
	_ = l.LoadConfigMap(cm)
}

// LoadConfigMap loads the bundle a bundle ConfigMap holds, with its
// signature and endorsements, as the ConfigMap source does.
func (l *Loader) LoadConfigMap(cm *corev1.ConfigMap) error {
	raw, gz, err := bundle.FromConfigMap(cm)
	if err != nil {
		l.reject(OriginConfigMap, err)
		return err
	}
	return l.LoadSealed(raw, gz, sealOf(cm), OriginConfigMap)
}
