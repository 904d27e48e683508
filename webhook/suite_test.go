package webhook

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/internal/testenv"
)

// The suite runs the real API server with the CRDs and the generated
// ValidatingWebhookConfiguration, and the webhook served by a real manager, so
// every rejection below went through kube-apiserver's admission chain.
var (
	k8sClient client.Client
	// restConfig is the admin's, for clients that impersonate a user.
	restConfig *rest.Config
	warnings   = &warningRecorder{}
	scheme     = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	assets, err := testenv.BinaryAssetsDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	validating, mutating, err := webhookConfigurations()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{testenv.CRDDir()},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
		// The API server dials https://localhost:<port>: the rotator's
		// certificate names "localhost", as in a cluster it names the Service.
		WebhookInstallOptions: envtest.WebhookInstallOptions{ValidatingWebhooks: validating, MutatingWebhooks: mutating,
			LocalServingHostExternalName: "localhost"},
	}
	cfg, err := env.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest:", err)
		return 1
	}
	defer func() { _ = env.Stop() }()

	_ = clientgoscheme.AddToScheme(scheme)
	_ = v1alpha1.AddToScheme(scheme)
	// Production's certificate path: the manager's rotator creates the CA and
	// serving certificate, injects the CA into the webhook configuration, and
	// the webhook server starts only once the certificate is on disk.
	wo := &env.WebhookInstallOptions
	certDir, err := os.MkdirTemp("", "toolgate-webhook-certs")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = os.RemoveAll(certDir) }()
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		WebhookServer: crwebhook.NewServer(crwebhook.Options{
			Host: wo.LocalServingHost, Port: wo.LocalServingPort, CertDir: certDir}),
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	registered, err := Setup(mgr, Options{CertMode: CertsSelfManaged, CertDir: certDir,
		SecretNamespace: "default", SecretName: certSecret, DNSName: "localhost",
		ValidatingWebhookConfiguration: "validating-webhook-configuration",
		MutatingWebhookConfiguration:   "mutating-webhook-configuration", Inject: &testInject})
	if err != nil {
		fmt.Fprintln(os.Stderr, "webhook setup:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = mgr.Start(ctx) }()
	go playKubelet(ctx, cfg, certDir)
	select {
	case <-registered:
	case <-time.After(60 * time.Second):
		fmt.Fprintln(os.Stderr, "the webhook was never registered: certificates not ready")
		return 1
	}
	if err := waitForTLS(net.JoinHostPort(wo.LocalServingHost, strconv.Itoa(wo.LocalServingPort))); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	restConfig = cfg
	clientCfg := rest.CopyConfig(cfg)
	clientCfg.WarningHandlerWithContext = warnings
	if k8sClient, err = client.New(clientCfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	return m.Run()
}

// webhookConfigurations reads the generated configurations and adds what
// config/webhook's kustomization patches in and the API server evaluates
// itself: the pod webhook's matchConditions.
func webhookConfigurations() ([]*admissionv1.ValidatingWebhookConfiguration, []*admissionv1.MutatingWebhookConfiguration, error) {
	f, err := os.Open(filepath.Join(testenv.WebhookDir(), "manifests.yaml"))
	if err != nil {
		return nil, nil, err
	}
	defer func() { _ = f.Close() }()
	var validating []*admissionv1.ValidatingWebhookConfiguration
	var mutating []*admissionv1.MutatingWebhookConfiguration
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		var u unstructured.Unstructured
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, nil, err
		}
		switch u.GetKind() {
		case "ValidatingWebhookConfiguration":
			var v admissionv1.ValidatingWebhookConfiguration
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &v); err != nil {
				return nil, nil, err
			}
			validating = append(validating, &v)
		case "MutatingWebhookConfiguration":
			var m admissionv1.MutatingWebhookConfiguration
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &m); err != nil {
				return nil, nil, err
			}
			for i := range m.Webhooks {
				m.Webhooks[i].MatchConditions = InjectMatchConditions()
			}
			mutating = append(mutating, &m)
		}
	}
	if len(validating) != 1 || len(mutating) != 1 {
		return nil, nil, fmt.Errorf("manifests.yaml: %d validating and %d mutating configurations, want 1 and 1", len(validating), len(mutating))
	}
	return validating, mutating, nil
}

func waitForTLS(addr string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // readiness probe only
		if err == nil {
			return conn.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("webhook server at %s never came up: %w", addr, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// warningRecorder collects the Warning headers the API server relays from the
// webhook, keyed by nothing: tests that read it do not run in parallel.
type warningRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warningRecorder) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, text)
}

func (w *warningRecorder) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.msgs
	w.msgs = nil
	return out
}

const certSecret = "toolgate-webhook-certs"

// playKubelet does what the kubelet does for the manager's Pod: it projects
// the certificate Secret into the certificate directory.
func playKubelet(ctx context.Context, cfg *rest.Config, dir string) {
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		panic(err)
	}
	var last string
	for ctx.Err() == nil {
		var s corev1.Secret
		if err := c.Get(ctx, client.ObjectKey{Namespace: "default", Name: certSecret}, &s); err == nil && string(s.Data["tls.crt"]) != last {
			for name, data := range s.Data {
				_ = os.WriteFile(filepath.Join(dir, name), data, 0o600)
			}
			last = string(s.Data["tls.crt"])
		}
		time.Sleep(100 * time.Millisecond)
	}
}
