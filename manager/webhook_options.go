package manager

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/toolgate/toolgate/endpoint"
	"github.com/toolgate/toolgate/usage/redisstore"
	"github.com/toolgate/toolgate/webhook"
)

// WebhookOptions configure the admission webhooks the manager serves.
type WebhookOptions struct {
	Enabled bool
	Host    string
	Port    int
	// CertMode is webhook.CertsSelfManaged or webhook.CertsProvided.
	CertMode        string
	CertDir         string
	SecretName      string
	SecretNamespace string // default: $POD_NAMESPACE
	ServiceName     string
	ValidatingName  string
	MutatingName    string
	// SidecarImage enables sidecar injection when set.
	SidecarImage      string
	SidecarPullPolicy string
	SidecarListen     string
	SidecarSocket     string
	SidecarUID        int64
	SidecarGID        int64
	SidecarNative     bool
	ClusterName       string
	// SidecarUsageStore and SidecarUsageStoreSecret are the shared usage
	// store injected sidecars count in, and the Secret (in each agent's
	// namespace, key password) holding its password.
	SidecarUsageStore       string
	SidecarUsageStoreSecret string
	SidecarMetrics          int
	SidecarCPU              string // request
	SidecarMemory           string // request and limit
	SidecarCPULimit         string
	// MaxExceptionDays: how far ahead a PolicyException's expiresAt may be.
	MaxExceptionDays int
}

func defaultWebhookOptions() WebhookOptions {
	return WebhookOptions{
		Enabled: true, Port: 9443, CertMode: webhook.CertsSelfManaged,
		CertDir:    "/tmp/k8s-webhook-server/serving-certs",
		SecretName: "toolgate-webhook-certs", ServiceName: "toolgate-webhook",
		ValidatingName: "toolgate-validating-webhook", MutatingName: "toolgate-mutating-webhook",
		SidecarPullPolicy: string(corev1.PullIfNotPresent), SidecarListen: endpoint.DefaultAddress, SidecarNative: true, SidecarMetrics: 9191,
		SidecarSocket: endpoint.DefaultSocket, SidecarUID: webhook.DefaultSidecarUID, SidecarGID: webhook.DefaultSidecarUID,
		SidecarCPU: "10m", SidecarMemory: "64Mi", SidecarCPULimit: "500m",
		MaxExceptionDays: webhook.DefaultMaxExceptionDays,
	}
}

func (w *WebhookOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&w.Enabled, "enable-webhooks", w.Enabled, "serve the Policy validating webhook (and sidecar injection when --sidecar-image is set)")
	fs.StringVar(&w.Host, "webhook-host", w.Host, "address the webhook server binds (default: all)")
	fs.IntVar(&w.Port, "webhook-port", w.Port, "port of the webhook server")
	fs.StringVar(&w.CertMode, "webhook-cert-mode", w.CertMode, `"self": create, inject and rotate certificates; "provided": use certificates mounted at --webhook-cert-dir (cert-manager)`)
	fs.StringVar(&w.CertDir, "webhook-cert-dir", w.CertDir, "directory holding tls.crt and tls.key")
	fs.StringVar(&w.SecretName, "webhook-secret-name", w.SecretName, "Secret holding the self-managed certificates")
	fs.StringVar(&w.SecretNamespace, "webhook-secret-namespace", w.SecretNamespace, "namespace of that Secret (default: $POD_NAMESPACE)")
	fs.StringVar(&w.ServiceName, "webhook-service-name", w.ServiceName, "Service in front of the webhook server; the certificate names <service>.<namespace>.svc")
	fs.StringVar(&w.ValidatingName, "validating-webhook-configuration", w.ValidatingName, "ValidatingWebhookConfiguration to keep the CA of")
	fs.StringVar(&w.MutatingName, "mutating-webhook-configuration", w.MutatingName, "MutatingWebhookConfiguration to keep the CA of")
	fs.StringVar(&w.SidecarImage, "sidecar-image", w.SidecarImage, `image injected into Pods annotated toolgate.dev/inject: "true"; empty disables injection`)
	fs.StringVar(&w.SidecarPullPolicy, "sidecar-image-pull-policy", w.SidecarPullPolicy, "pull policy of the injected sidecar")
	fs.StringVar(&w.SidecarListen, "sidecar-listen", w.SidecarListen, "where the injected sidecar also listens, on the Pod's loopback, for clients that cannot use the socket; empty: the socket only")
	fs.StringVar(&w.SidecarSocket, "sidecar-socket", w.SidecarSocket, "the injected sidecar's Unix socket; its directory is an emptyDir mounted read-only into the Pod's other containers, whose TOOLGATE_URL points at it; empty: TCP only")
	fs.Int64Var(&w.SidecarUID, "sidecar-uid", w.SidecarUID, "user the injected sidecar runs as: its own, neither root nor the agent's")
	fs.Int64Var(&w.SidecarGID, "sidecar-gid", w.SidecarGID, "group the injected sidecar runs as")
	fs.BoolVar(&w.SidecarNative, "sidecar-native", w.SidecarNative, "inject the sidecar as a restartable init container (Kubernetes 1.29+), started before the agent's containers; false appends it to the containers")
	fs.IntVar(&w.SidecarMetrics, "sidecar-metrics-port", w.SidecarMetrics, "port on the Pod's IP where the injected sidecar serves /metrics (named tg-metrics, for a PodMonitor); 0 keeps metrics on its loopback listener only")
	fs.StringVar(&w.ClusterName, "cluster-name", w.ClusterName, "this cluster's name, added as the label cluster to injected sidecars' decision log lines")
	fs.StringVar(&w.SidecarUsageStore, "sidecar-usage-store", w.SidecarUsageStore, "the shared usage store (redis://HOST:PORT/DB or rediss://) injected sidecars count limits with store: shared in (their --usage-store, with --cluster-name); empty: none, and such limits deny USAGE_UNAVAILABLE")
	fs.StringVar(&w.SidecarUsageStoreSecret, "sidecar-usage-store-password-secret", w.SidecarUsageStoreSecret, "a Secret in each agent's namespace whose key password is the usage store's password, mounted read-only into the sidecar alone")
	fs.StringVar(&w.SidecarCPU, "sidecar-cpu-request", w.SidecarCPU, "CPU request of the injected sidecar")
	fs.StringVar(&w.SidecarCPULimit, "sidecar-cpu-limit", w.SidecarCPULimit, "CPU limit of the injected sidecar")
	fs.StringVar(&w.SidecarMemory, "sidecar-memory", w.SidecarMemory, "memory request and limit of the injected sidecar")
	fs.IntVar(&w.MaxExceptionDays, "max-exception-days", w.MaxExceptionDays,
		"the webhook refuses a PolicyException whose expiresAt is more than this many days ahead (or already past)")
}

// maxExceptionDays bounds --max-exception-days: ten years is past any
// review cycle, and keeps the limit well inside a time.Duration.
const maxExceptionDays = 3650

func (w WebhookOptions) validateMaxExceptionDays() error {
	if w.MaxExceptionDays < 1 || w.MaxExceptionDays > maxExceptionDays {
		return fmt.Errorf("--max-exception-days: %d is not a number of days from 1 to %d", w.MaxExceptionDays, maxExceptionDays)
	}
	return nil
}

// setup turns the flags into webhook.Options; bundleConfigMap is the name
// injected sidecars watch.
func (w WebhookOptions) setup(bundleConfigMap string) (webhook.Options, error) {
	ns := w.SecretNamespace
	if ns == "" {
		ns = os.Getenv("POD_NAMESPACE")
	}
	o := webhook.Options{CertMode: w.CertMode, CertDir: w.CertDir, SecretNamespace: ns, SecretName: w.SecretName,
		ValidatingWebhookConfiguration: w.ValidatingName, MutatingWebhookConfiguration: w.MutatingName,
		MaxExceptionDays: w.MaxExceptionDays}
	if ns != "" {
		o.DNSName = fmt.Sprintf("%s.%s.svc", w.ServiceName, ns)
	}
	var errs []error
	if w.CertMode == webhook.CertsSelfManaged && ns == "" {
		errs = append(errs, errors.New("--webhook-secret-namespace: required with --webhook-cert-mode=self outside a pod (POD_NAMESPACE is unset); or run with --enable-webhooks=false"))
	}
	if w.Port < 1 || w.Port > 65535 {
		errs = append(errs, fmt.Errorf("--webhook-port: %d is not a port from 1 to 65535", w.Port))
	}
	if ns != "" {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--webhook-secret-namespace %q: %s", ns, msgs[0]))
		}
	}
	if w.SidecarImage != "" {
		inject := &webhook.InjectOptions{Image: w.SidecarImage, ImagePullPolicy: corev1.PullPolicy(w.SidecarPullPolicy),
			BundleConfigMap: bundleConfigMap, Listen: w.SidecarListen, Socket: w.SidecarSocket, RunAsUser: w.SidecarUID, RunAsGroup: w.SidecarGID,
			Native: w.SidecarNative, ClusterName: w.ClusterName, MetricsPort: int32(w.SidecarMetrics),
			UsageStore: w.SidecarUsageStore, UsageStorePasswordSecret: w.SidecarUsageStoreSecret}
		errs = append(errs, w.validateUsageStore())
		if w.SidecarSocket == "" && w.SidecarListen == "" {
			errs = append(errs, errors.New("--sidecar-socket and --sidecar-listen are both empty: the injected sidecar needs one to answer on"))
		}
		if w.SidecarSocket != "" {
			if err := webhook.ValidateSocket(w.SidecarSocket); err != nil {
				errs = append(errs, fmt.Errorf("--sidecar-socket: %w", err))
			}
		}
		if w.SidecarUID <= 0 || w.SidecarUID > math.MaxInt32 {
			errs = append(errs, fmt.Errorf("--sidecar-uid: %d is not a user from 1 to %d (the sidecar never runs as root)", w.SidecarUID, math.MaxInt32))
		}
		if w.SidecarGID <= 0 || w.SidecarGID > math.MaxInt32 {
			errs = append(errs, fmt.Errorf("--sidecar-gid: %d is not a group from 1 to %d", w.SidecarGID, math.MaxInt32))
		}
		if w.SidecarMetrics < 0 || w.SidecarMetrics > 65535 {
			errs = append(errs, fmt.Errorf("--sidecar-metrics-port: %d is not 0 (off) or a port up to 65535", w.SidecarMetrics))
		}
		// A label value: it lands in a container arg, where kubelet would
		// expand $(...), and in every decision log line.
		if msgs := validation.IsValidLabelValue(w.ClusterName); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--cluster-name %q: %s", w.ClusterName, strings.Join(msgs, "; ")))
		}
		switch inject.ImagePullPolicy {
		case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
		default:
			errs = append(errs, fmt.Errorf("--sidecar-image-pull-policy: %q is not Always, IfNotPresent or Never", w.SidecarPullPolicy))
		}
		quantity := func(flag, v string) resource.Quantity {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				errs = append(errs, fmt.Errorf("--%s: %q: %w", flag, v, err))
			}
			return q
		}
		cpu, cpuLimit, mem := quantity("sidecar-cpu-request", w.SidecarCPU), quantity("sidecar-cpu-limit", w.SidecarCPULimit), quantity("sidecar-memory", w.SidecarMemory)
		inject.Resources = corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: cpuLimit, corev1.ResourceMemory: mem},
		}
		o.Inject = inject
	}
	if len(errs) == 0 {
		if err := o.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("webhook flags: %w", err))
		}
	}
	return o, errors.Join(errs...)
}

// validateUsageStore checks the usage store flags: what the sidecar's
// --usage-store accepts (redisstore.CheckURL), no $(...) that
// kubelet would expand in the injected args, and a Secret name.
func (w WebhookOptions) validateUsageStore() error {
	var errs []error
	if w.SidecarUsageStore == "" {
		if w.SidecarUsageStoreSecret != "" {
			errs = append(errs, errors.New("--sidecar-usage-store-password-secret is only used with --sidecar-usage-store"))
		}
		return errors.Join(errs...)
	}
	if _, err := redisstore.CheckURL(w.SidecarUsageStore); err != nil {
		errs = append(errs, fmt.Errorf("--sidecar-usage-store: %w", err))
	} else if strings.Contains(w.SidecarUsageStore, "$(") {
		errs = append(errs, fmt.Errorf("--sidecar-usage-store %q: kubelet would expand $(...) in the sidecar's arguments", w.SidecarUsageStore))
	}
	if w.SidecarUsageStoreSecret != "" {
		if msgs := validation.IsDNS1123Subdomain(w.SidecarUsageStoreSecret); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--sidecar-usage-store-password-secret %q is not a Secret name: %s", w.SidecarUsageStoreSecret, strings.Join(msgs, "; ")))
		}
	}
	return errors.Join(errs...)
}
