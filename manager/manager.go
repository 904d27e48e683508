package manager

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/reports"
	"github.com/toolgate/toolgate/webhook"
)

// readyzWait bounds how long a readiness probe waits for the informers.
const readyzWait = time.Second

// Run connects to the cluster and runs the manager until ctx is done.
func Run(ctx context.Context, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	cfg, err := restConfig(o.Kubeconfig)
	if err != nil {
		return err
	}
	mgr, err := New(cfg, o)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// New builds a manager with the controllers, probes and extensions
// registered, not started. Tests and measurements use it to run exactly what
// Run runs.
func New(cfg *rest.Config, o Options) (ctrl.Manager, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	// ClusterPolicies and ClusterFrozenAgents reach only the namespaces
	// the cache holds.
	o.Controller.Namespaces = o.Namespaces
	if cfg.QPS == 0 {
		// As ctrl.GetConfig does: client-side throttling (5 QPS by default)
		// would delay status writes; the API server's fairness protects it.
		cfg.QPS = -1
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	signingNS := o.Signing.namespace()
	if signingNS != "" {
		ring, err := signingKeys(cfg, scheme, signingNS, o.Signing.SecretName)
		if err != nil {
			return nil, err
		}
		o.Controller.Keys = controllers.NewSigningKeys(ring)
	} else {
		ctrl.Log.WithName("signing").Info("no --signing-namespace and no POD_NAMESPACE: bundles are published unsigned; sidecars with --trusted-keys will refuse them")
	}
	// managedFields are never read here, and they are a large part of
	// every cached object: the cache is what the manager's memory grows
	// with, at 60,000 objects (make measure-scale).
	cacheOpts := cache.Options{ByObject: controllers.CacheByObject(o.Controller), DefaultTransform: cache.TransformStripManagedFields()}
	if signingNS != "" {
		cacheOpts.ByObject[&corev1.Secret{}] = signingKeyCache(signingNS, o.Signing.SecretName)
	}
	if len(o.Namespaces) > 0 {
		cacheOpts.DefaultNamespaces = make(map[string]cache.Config, len(o.Namespaces))
		for _, ns := range o.Namespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	var webhookServer crwebhook.Server
	if o.Webhooks.Enabled {
		webhookServer = crwebhook.NewServer(crwebhook.Options{Host: o.Webhooks.Host, Port: o.Webhooks.Port, CertDir: o.Webhooks.CertDir})
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		WebhookServer:                 webhookServer,
		Scheme:                        scheme,
		Cache:                         cacheOpts,
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsBindAddress},
		HealthProbeBindAddress:        o.HealthProbeBindAddress,
		PprofBindAddress:              o.PprofBindAddress, // "" and "0" are off
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              LeaderElectionID,
		LeaderElectionNamespace:       o.LeaderElectionNamespace,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return nil, fmt.Errorf("creating the manager: %w", err)
	}
	if err := controllers.Setup(mgr, o.Controller); err != nil {
		return nil, err
	}
	if signingNS != "" {
		if err := setupSigningKeyReload(mgr, signingNS, o.Signing.SecretName, o.Controller.Keys, o.Controller.SkipNameValidation); err != nil {
			return nil, fmt.Errorf("watching the signing key Secret: %w", err)
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("informers", informersSynced(mgr)); err != nil {
		return nil, err
	}
	if o.Webhooks.Enabled {
		if err := setupWebhooks(mgr, o); err != nil {
			return nil, err
		}
	}
	if o.Reports.Enabled {
		ro := o.Reports.Options
		ro.PodNamespace, ro.PodName = os.Getenv("POD_NAMESPACE"), os.Getenv("POD_NAME")
		if err := reports.Setup(mgr, ro); err != nil {
			return nil, err
		}
	}
	for _, ext := range o.Extensions {
		if err := ext(mgr); err != nil {
			return nil, fmt.Errorf("registering an extension: %w", err)
		}
	}
	return mgr, nil
}

// setupWebhooks registers the webhooks, and a readiness check that holds the
// pod out of its Service until they serve (in self mode, until the
// certificates exist).
func setupWebhooks(mgr ctrl.Manager, o Options) error {
	wo, err := o.Webhooks.setup(o.Controller.ConfigMapName)
	if err != nil {
		return err
	}
	if wo.Inject != nil && o.Reports.Enabled {
		wo.Inject.ReportsURL = o.Reports.SidecarURL
	}
	if wo.Inject != nil && o.Controller.Keys != nil {
		// Read at each admission: a key added since start is trusted by
		// the Pods admitted from then on.
		keys := o.Controller.Keys
		wo.Inject.TrustedKeysPEM = func() string { return string(keys.Load().PublicPEM()) }
	}
	registered, err := webhook.Setup(mgr, wo)
	if err != nil {
		return err
	}
	return mgr.AddReadyzCheck("webhooks", func(req *http.Request) error {
		select {
		case <-registered:
			return mgr.GetWebhookServer().StartedChecker()(req)
		default:
			return errors.New("webhook certificates are not ready yet")
		}
	})
}

// signingKeys reads (creating on first start) the keyring and publishes its
// public keys, before anything is signed with it.
func signingKeys(cfg *rest.Config, scheme *runtime.Scheme, ns, secret string) (*bundle.Keyring, error) {
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), signingTimeout)
	defer cancel()
	ring, err := EnsureSigningKeys(ctx, c, ns, secret)
	if err != nil {
		return nil, err
	}
	if err := PublishSigningKeys(ctx, c, ns, ring); err != nil {
		return nil, err
	}
	ctrl.Log.WithName("signing").Info("signing bundles", "key", ring.Current().ID(), "trusted", ring.Trusted().IDs(),
		"publicKeys", ns+"/"+bundle.SigningKeysConfigMapName)
	return ring, nil
}

// informersSynced is ready once the cache has listed everything it watches:
// before that, the manager would publish bundles from a partial view.
func informersSynced(mgr ctrl.Manager) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), readyzWait)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("informers have not synced yet")
		}
		return nil
	}
}

// restConfig honours an explicit kubeconfig, then controller-runtime's usual
// order: $KUBECONFIG, in-cluster, ~/.kube/config.
func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig == "" {
		cfg, err := ctrl.GetConfig()
		if err != nil {
			return nil, fmt.Errorf("finding the cluster (set --kubeconfig or KUBECONFIG, or run in a pod): %w", err)
		}
		return cfg, nil
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig}, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("--kubeconfig %s: %w", kubeconfig, err)
	}
	return cfg, nil
}
