// Package manager runs toolgate's operator: `toolgate manager`. It wires the
// controllers into a controller-runtime manager with leader election, metrics
// and health probes; flags fill an Options value and nothing else.
package manager

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/reports"
)

// LeaderElectionID names the Lease replicas compete for.
const LeaderElectionID = "toolgate-manager.toolgate.dev"

// Options configure the manager. Start from DefaultOptions.
type Options struct {
	// MetricsBindAddress serves /metrics; "0" disables it.
	MetricsBindAddress string
	// HealthProbeBindAddress serves /healthz and /readyz; "0" disables it.
	HealthProbeBindAddress string
	// PprofBindAddress serves net/http/pprof, on a loopback address only
	// (profiles show memory contents); "0" disables it.
	PprofBindAddress string
	// LeaderElect makes replicas elect one active manager.
	LeaderElect bool
	// LeaderElectionNamespace holds the Lease; empty means the pod's own
	// namespace, which only exists in a cluster.
	LeaderElectionNamespace string
	// Namespaces to watch; empty means all.
	Namespaces []string
	// Kubeconfig is an explicit kubeconfig file; empty means KUBECONFIG,
	// in-cluster, then ~/.kube/config.
	Kubeconfig string
	// Controller configures the bundle controller (ConfigMap name, clock,
	// size limits).
	Controller controllers.Options
	// Webhooks configure the admission webhooks.
	Webhooks WebhookOptions
	// Signing says where the bundle signing keys live.
	Signing SigningOptions
	// Reports configure the policy reports made of the sidecars' decisions.
	Reports ReportsOptions
	// Extensions run after the controllers are registered, before the
	// manager starts.
	Extensions []Extension
}

// Extension adds something to a manager, such as a webhook.
type Extension func(ctrl.Manager) error

// DefaultOptions are the flags' defaults.
func DefaultOptions() Options {
	return Options{
		MetricsBindAddress:     ":8080",
		HealthProbeBindAddress: ":8081",
		PprofBindAddress:       "0",
		Controller: controllers.Options{ConfigMapName: bundle.DefaultConfigMapName, MaxConcurrentReconciles: controllers.DefaultMaxConcurrentReconciles,
			Approvals: controllers.ApprovalOptions{Retention: controllers.DefaultApprovalRetention}},
		Webhooks: defaultWebhookOptions(),
		Signing:  SigningOptions{SecretName: bundle.SigningKeySecretName},
		Reports:  ReportsOptions{Options: reports.DefaultOptions()},
	}
}

// AddFlags binds o's fields to flags in fs.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.MetricsBindAddress, "metrics-bind-address", o.MetricsBindAddress,
		`address serving /metrics, as host:port or :port; "0" disables it`)
	fs.StringVar(&o.HealthProbeBindAddress, "health-probe-bind-address", o.HealthProbeBindAddress,
		`address serving /healthz and /readyz, as host:port or :port; "0" disables it`)
	fs.StringVar(&o.PprofBindAddress, "pprof-bind-address", o.PprofBindAddress,
		`loopback address (127.0.0.1:port, [::1]:port or localhost:port) serving /debug/pprof for profiling; "0" disables it`)
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect,
		"elect one active manager among replicas (needs a Lease)")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace,
		"namespace of the leader election Lease (default: the pod's namespace)")
	fs.StringVar(&o.Controller.ConfigMapName, "bundle-configmap-name", o.Controller.ConfigMapName,
		"name of the bundle ConfigMap published in each namespace")
	fs.BoolVar(&o.Controller.PublishRego, "publish-rego", o.Controller.PublishRego,
		"also publish each namespace's bundle as an OPA bundle (toolgate export rego --tar) under binaryData."+bundle.RegoTarKey+
			" of its bundle ConfigMap, signed for OPA when bundles are signed; it counts against the ConfigMap size limit")
	fs.BoolVar(&o.Controller.RegoUnsigned, "rego-unsigned", o.Controller.RegoUnsigned,
		"with --publish-rego: leave the Rego bundle unsigned even when bundles are signed, for an OPA that loads it through its configuration file "+
			"(a file:// resource or a bundle service), whose keys cannot be EdDSA; only the bundle ConfigMap's write protection then guards it")
	fs.IntVar(&o.Controller.MaxConcurrentReconciles, "max-concurrent-reconciles", o.Controller.MaxConcurrentReconciles,
		"namespaces whose bundles are published at once (status passes: at most 4 at once, after the publishes)")
	fs.StringSliceVar(&o.Namespaces, "namespaces", o.Namespaces,
		"comma-separated namespaces to watch (default: all)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig,
		"kubeconfig file (default: $KUBECONFIG, in-cluster config, then ~/.kube/config)")
	fs.Var((*positiveDuration)(&o.Controller.Approvals.Retention), "approvals-retention",
		"how long an ApprovalRequest stays after it expired, was denied or was used, before the manager deletes it")
	fs.StringVar(&o.Controller.Approvals.NotifyURL, "approvals-notify-url", o.Controller.Approvals.NotifyURL,
		"http(s) URL that receives a JSON notice (POST) for each new ApprovalRequest, retried with backoff; empty: no notices")
	fs.StringVar(&o.Controller.Approvals.NotifyAuthHeaderFile, "approvals-notify-auth-header-file", o.Controller.Approvals.NotifyAuthHeaderFile,
		"file holding the notices' Authorization header value (such as \"Bearer ...\"), read again for each notice")
	o.Webhooks.addFlags(fs)
	o.Reports.addFlags(fs)
	fs.StringVar(&o.Signing.Namespace, "signing-namespace", o.Signing.Namespace,
		"namespace of the bundle signing key Secret and of the published "+bundle.SigningKeysConfigMapName+" ConfigMap (default: $POD_NAMESPACE; with neither, bundles are published unsigned)")
	fs.StringVar(&o.Signing.SecretName, "signing-key-secret", o.Signing.SecretName,
		"Secret holding the bundle signing keys (created with one key on first start)")
}

// Validate reports every flag that cannot work, so a typo fails at start-up
// and not as a crash loop later.
func (o Options) Validate() error {
	var errs []error
	if err := validateAddress(o.MetricsBindAddress); err != nil {
		errs = append(errs, fmt.Errorf("--metrics-bind-address: %w", err))
	}
	if err := validateAddress(o.HealthProbeBindAddress); err != nil {
		errs = append(errs, fmt.Errorf("--health-probe-bind-address: %w", err))
	}
	if err := validateLoopbackAddress(o.PprofBindAddress); err != nil {
		errs = append(errs, fmt.Errorf("--pprof-bind-address: %w", err))
	}
	bundleOpts := o.Controller
	bundleOpts.Approvals = controllers.ApprovalOptions{} // checked below, flag by flag
	if n := o.Controller.MaxConcurrentReconciles; n < 0 {
		errs = append(errs, fmt.Errorf("--max-concurrent-reconciles %d: must be 1 or more", n))
		bundleOpts.MaxConcurrentReconciles = 0 // reported here, not again under --bundle-configmap-name
	}
	if o.Controller.ConfigMapName == "" {
		errs = append(errs, errors.New("--bundle-configmap-name: must not be empty"))
	} else if err := bundleOpts.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("--bundle-configmap-name: %w", err))
	}
	errs = append(errs, o.validateApprovals()...)
	if o.LeaderElectionNamespace != "" {
		if msgs := validation.IsDNS1123Label(o.LeaderElectionNamespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--leader-election-namespace %q: %s", o.LeaderElectionNamespace, msgs[0]))
		}
	}
	for _, ns := range o.Namespaces {
		if ns == "" {
			errs = append(errs, errors.New("--namespaces: empty namespace name in the list"))
		} else if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--namespaces: %q: %s", ns, msgs[0]))
		}
	}
	if o.Kubeconfig != "" {
		if _, err := os.Stat(o.Kubeconfig); err != nil {
			errs = append(errs, fmt.Errorf("--kubeconfig: %w", err))
		}
	}
	if ns := o.Signing.namespace(); ns != "" {
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--signing-namespace %q: %s", ns, msgs[0]))
		}
		if msgs := validation.IsDNS1123Subdomain(o.Signing.SecretName); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--signing-key-secret %q: %s", o.Signing.SecretName, msgs[0]))
		}
	}
	if err := o.Reports.validate(); err != nil {
		errs = append(errs, err)
	}
	if o.Webhooks.Enabled {
		if err := o.Webhooks.validateMaxExceptionDays(); err != nil {
			errs = append(errs, err)
		}
		if _, err := o.Webhooks.setup(o.Controller.ConfigMapName); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// validateAddress accepts "0" (disabled), ":port" and "host:port".
func validateAddress(addr string) error {
	if addr == "0" {
		return nil
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port, :port or 0: %w", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("%q: port %q is not a number from 0 to 65535", addr, port)
	}
	if host != "" && net.ParseIP(host) == nil {
		if msgs := validation.IsDNS1123Subdomain(host); len(msgs) > 0 {
			return fmt.Errorf("%q: host %q is neither an IP address nor a host name", addr, host)
		}
	}
	return nil
}

// validateLoopbackAddress accepts "0" or "" (off: programs that fill
// Options themselves leave it empty), or host:port where host is a loopback
// address: what it serves must not be reachable from the network.
func validateLoopbackAddress(addr string) error {
	if addr == "0" || addr == "" {
		return nil
	}
	if err := validateAddress(addr); err != nil {
		return err
	}
	host, _, _ := net.SplitHostPort(addr)
	if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
		return fmt.Errorf("%q: host %q is not a loopback address (127.0.0.1, ::1 or localhost)", addr, host)
	}
	return nil
}

// validateApprovals names the approval flag each problem is in. A zero
// retention is the default (controllers.DefaultApprovalRetention) for
// programs that fill Options themselves; the flag refuses it
// (positiveDuration).
func (o Options) validateApprovals() []error {
	a := o.Controller.Approvals
	var errs []error
	if a.Retention < 0 {
		errs = append(errs, fmt.Errorf("--approvals-retention %s: must be a positive duration, such as 24h", a.Retention))
	}
	if a.NotifyURL != "" {
		if err := controllers.ValidateNotifyURL(a.NotifyURL); err != nil {
			errs = append(errs, fmt.Errorf("--approvals-notify-url: %w", err))
		}
	} else if a.NotifyAuthHeaderFile != "" {
		errs = append(errs, errors.New("--approvals-notify-auth-header-file needs --approvals-notify-url: nothing would use it"))
	}
	return errs
}

// positiveDuration is a duration flag that refuses zero and negative
// values when parsed: "--approvals-retention=0" reads as "delete at once",
// which the library would take as "the default" instead.
type positiveDuration time.Duration

func (d *positiveDuration) String() string { return time.Duration(*d).String() }
func (d *positiveDuration) Type() string   { return "duration" }

func (d *positiveDuration) Set(s string) error {
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	if v <= 0 {
		return fmt.Errorf("%s: must be a positive duration, such as 24h", s)
	}
	*d = positiveDuration(v)
	return nil
}
