package webhook

import (
	"context"
	"errors"
	"fmt"
	"path"
	"regexp"
	"strings"
	"time"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/endpoint"
)

// Certificate modes.
const (
	// CertsSelfManaged: the manager creates a CA and serving certificate in a
	// Secret, injects the CA into the webhook configuration and rotates both.
	CertsSelfManaged = "self"
	// CertsProvided: certificates are mounted at CertDir (cert-manager, or any
	// other issuer) and the CA is injected by someone else.
	CertsProvided = "provided"
)

// The rotator keeps its Secret current and injects the CA into our webhook
// configurations. Its own cache lists and watches every Secret of the
// namespace (which cannot be narrowed by name) and ensureSecret creates
// its Secret (create cannot be narrowed by name either); it reads and
// writes only that one.
// +kubebuilder:rbac:groups="",namespace=toolgate-system,resources=secrets,verbs=list;watch;create
// +kubebuilder:rbac:groups="",namespace=toolgate-system,resources=secrets,resourceNames=toolgate-webhook-certs,verbs=get;update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=get;list;watch;update

// Options configure the admission webhooks.
type Options struct {
	CertMode string
	// CertDir holds tls.crt and tls.key (written there in self mode).
	CertDir string
	// SecretNamespace/SecretName: where self mode keeps the certificates.
	SecretNamespace, SecretName string
	// DNSName is the name the API server dials: <service>.<namespace>.svc.
	DNSName string
	// ValidatingWebhookConfiguration and MutatingWebhookConfiguration are the
	// objects whose caBundle self mode keeps current.
	ValidatingWebhookConfiguration string
	MutatingWebhookConfiguration   string
	// Inject, when set, enables sidecar injection into annotated Pods.
	Inject *InjectOptions
	// MaxExceptionDays is how far ahead a PolicyException's expiresAt may
	// be; 0: DefaultMaxExceptionDays.
	MaxExceptionDays int
}

// Validate reports option mistakes before anything starts.
func (o Options) Validate() error {
	var errs []error
	switch o.CertMode {
	case CertsSelfManaged:
		if o.SecretNamespace == "" || o.SecretName == "" {
			errs = append(errs, errors.New("self-managed certificates need a secret namespace and name"))
		}
		if o.DNSName == "" {
			errs = append(errs, errors.New("self-managed certificates need the webhook service DNS name"))
		}
		if o.ValidatingWebhookConfiguration == "" {
			errs = append(errs, errors.New("self-managed certificates need the ValidatingWebhookConfiguration name"))
		}
		if o.Inject != nil && o.MutatingWebhookConfiguration == "" {
			errs = append(errs, errors.New("self-managed certificates with injection need the MutatingWebhookConfiguration name"))
		}
	case CertsProvided:
	default:
		errs = append(errs, fmt.Errorf("certificate mode %q: want %q or %q", o.CertMode, CertsSelfManaged, CertsProvided))
	}
	if o.CertDir == "" {
		errs = append(errs, errors.New("a certificate directory is required"))
	}
	if o.MaxExceptionDays < 0 {
		errs = append(errs, fmt.Errorf("the longest a PolicyException may last must be a positive number of days, not %d", o.MaxExceptionDays))
	}
	if o.Inject != nil {
		if o.Inject.Image == "" {
			errs = append(errs, errors.New("sidecar injection needs a sidecar image"))
		}
		if o.Inject.BundleConfigMap == "" {
			errs = append(errs, errors.New("sidecar injection needs the bundle ConfigMap name"))
		}
		if o.Inject.Listen == "" && o.Inject.Socket == "" {
			errs = append(errs, errors.New("sidecar injection needs a socket or a listen address"))
		}
		if o.Inject.Socket != "" {
			if err := ValidateSocket(o.Inject.Socket); err != nil {
				errs = append(errs, err)
			}
		}
		if o.Inject.RunAsUser <= 0 || o.Inject.RunAsGroup <= 0 {
			errs = append(errs, fmt.Errorf("the sidecar's user and group must not be root or unset, not %d:%d: the sidecar runs as a user of its own (default %d)",
				o.Inject.RunAsUser, o.Inject.RunAsGroup, DefaultSidecarUID))
		}
	}
	return errors.Join(errs...)
}

// socketPathPattern keeps the socket path plain: kubelet would expand
// $(VAR) in the sidecar's args, and a mount path needs no more than this.
var socketPathPattern = regexp.MustCompile(`^(/[A-Za-z0-9._-]+)+$`)

// ValidateSocket checks the injected socket's path: absolute and plain, in
// a directory of its own (mounted into every container of the Pod), and
// short enough for a Unix socket address.
func ValidateSocket(p string) error {
	dir := path.Dir(p)
	switch {
	case !socketPathPattern.MatchString(p) || path.Clean(p) != p:
		return fmt.Errorf("socket %q: want a clean absolute path of letters, digits and . _ -", p)
	case len(p) > endpoint.MaxSocketPath:
		return fmt.Errorf("socket %q: %d bytes, more than the %d a Unix socket address holds", p, len(p), endpoint.MaxSocketPath)
	case dir == "/" || strings.Count(dir, "/") < 2:
		return fmt.Errorf("socket %q: its directory %s is mounted over every container's own; use a directory of its own such as %s", p, dir, path.Dir(endpoint.DefaultSocket))
	case dir == cacheMountPath || strings.HasPrefix(dir+"/", cacheMountPath+"/") || strings.HasPrefix(cacheMountPath+"/", dir+"/"):
		return fmt.Errorf("socket %q: its directory overlaps the sidecar's bundle cache %s", p, cacheMountPath)
	case strings.HasPrefix(tokenMountPath+"/", dir+"/") || strings.HasPrefix(dir+"/", path.Dir(tokenMountPath)+"/"):
		return fmt.Errorf("socket %q: its directory overlaps the service account token's %s", p, tokenMountPath)
	}
	return nil
}

// Setup registers the webhooks with mgr. In self mode it also adds the
// certificate rotator and registers the webhooks only once their certificate
// exists, so the API server is never pointed at a server that cannot serve
// TLS. The returned channel closes when the webhooks are registered.
func Setup(mgr ctrl.Manager, o Options) (<-chan struct{}, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	registered := make(chan struct{})
	register := func() error {
		if err := SetupPolicyWebhook(mgr); err != nil {
			return err
		}
		if err := SetupClusterPolicyWebhook(mgr); err != nil {
			return err
		}
		if err := SetupExceptionWebhook(mgr, o.MaxExceptionDays); err != nil {
			return err
		}
		if o.Inject != nil {
			return SetupPodInjector(mgr, *o.Inject)
		}
		return nil
	}
	if o.CertMode == CertsProvided {
		if err := register(); err != nil {
			return nil, err
		}
		close(registered)
		return registered, nil
	}
	if err := ensureSecret(mgr, o); err != nil {
		return nil, err
	}
	certsReady := make(chan struct{})
	err := rotator.AddRotator(mgr, &rotator.CertRotator{
		SecretKey:      types.NamespacedName{Namespace: o.SecretNamespace, Name: o.SecretName},
		CertDir:        o.CertDir,
		CAName:         "toolgate-ca",
		CAOrganization: "toolgate",
		DNSName:        o.DNSName,
		IsReady:        certsReady,
		Webhooks:       webhookInfos(o),
		// Every replica needs the certificate on disk, not only the leader.
		RequireLeaderElection: false,
	})
	if err != nil {
		return nil, fmt.Errorf("adding the certificate rotator: %w", err)
	}
	go func() {
		<-certsReady
		if err := register(); err != nil {
			ctrl.Log.WithName("webhook").Error(err, "registering the webhooks")
			return
		}
		close(registered)
	}()
	return registered, nil
}

func webhookInfos(o Options) []rotator.WebhookInfo {
	infos := []rotator.WebhookInfo{{Name: o.ValidatingWebhookConfiguration, Type: rotator.Validating}}
	if o.Inject != nil {
		infos = append(infos, rotator.WebhookInfo{Name: o.MutatingWebhookConfiguration, Type: rotator.Mutating})
	}
	return infos
}

// ensureSecret creates the (empty) certificate Secret the rotator fills: the
// rotator only updates an existing one. The chart creates it too; this makes
// a bare `toolgate manager` work.
func ensureSecret(mgr ctrl.Manager, o Options) error {
	c, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return err
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: o.SecretNamespace, Name: o.SecretName,
		Labels: map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the webhook certificate secret %s/%s: %w", o.SecretNamespace, o.SecretName, err)
	}
	return nil
}
