package manager

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/controllers"
)

// SigningKeyControllerName names the key Secret watch in logs and events.
const SigningKeyControllerName = "toolgate-signing-key"

// maxEventNote keeps a parse error within what an event note holds.
const maxEventNote = 1000

var (
	signingKeysValid = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "toolgate_signing_keys_valid",
		Help: "1 while the signing key Secret holds a valid keyring, 0 while it is invalid or deleted: bundles are then still signed with the last valid keyring and rotation steps do not take effect.",
	})
	registerSigningMetricsOnce sync.Once
)

// signingKeyCache restricts the manager's Secret informer to the key
// Secret: list and watch carry its namespace and a metadata.name field
// selector, so the manager holds no other Secret in memory and RBAC can
// name the one Secret it reads.
func signingKeyCache(ns, name string) cache.ByObject {
	return cache.ByObject{
		Namespaces: map[string]cache.Config{ns: {}},
		Field:      fields.OneTermEqualSelector("metadata.name", name),
	}
}

// signingKeyReloader swaps the keyring when the key Secret changes, on
// every replica (each one signs when it leads and hands the public keys to
// the Pods it admits). An invalid or deleted Secret changes nothing: the
// last valid keyring keeps signing, and the event, the log and
// toolgate_signing_keys_valid say so.
type signingKeyReloader struct {
	cached   client.Reader // the restricted Secret informer
	direct   client.Client // the public keys ConfigMap is not in the cache
	key      types.NamespacedName
	keys     *controllers.SigningKeys
	recorder events.EventRecorder
}

func setupSigningKeyReload(mgr ctrl.Manager, ns, name string, keys *controllers.SigningKeys, skipNameValidation bool) error {
	registerSigningMetricsOnce.Do(func() { metrics.Registry.MustRegister(signingKeysValid) })
	signingKeysValid.Set(1) // New read it and refused to start otherwise
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return err
	}
	r := &signingKeyReloader{cached: mgr.GetClient(), direct: direct, key: types.NamespacedName{Namespace: ns, Name: name},
		keys: keys, recorder: mgr.GetEventRecorder(SigningKeyControllerName)}
	isKeySecret := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == ns && o.GetName() == name
	})
	noLeader := false
	return ctrl.NewControllerManagedBy(mgr).
		Named(SigningKeyControllerName).
		For(&corev1.Secret{}, builder.WithPredicates(isKeySecret)).
		WithOptions(controller.Options{NeedLeaderElection: &noLeader, SkipNameValidation: &skipNameValidation}).
		Complete(r)
}

func (r *signingKeyReloader) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	var s corev1.Secret
	err := r.cached.Get(ctx, r.key, &s)
	if apierrors.IsNotFound(err) {
		r.invalid(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: r.key.Namespace, Name: r.key.Name}},
			fmt.Errorf("the signing key Secret %s was deleted", r.key))
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	ring, err := bundle.ParseKeyring(s.Data[bundle.SigningKeySecretKey])
	if err != nil {
		// Terminal until the Secret changes again: retrying cannot fix it.
		r.invalid(&s, fmt.Errorf("the signing key Secret %s, key %s: %w", r.key, bundle.SigningKeySecretKey, err))
		return ctrl.Result{}, nil
	}
	signingKeysValid.Set(1)
	if bytes.Equal(ring.PrivatePEM(), r.keys.Load().PrivatePEM()) {
		return ctrl.Result{}, nil
	}
	// The public keys go out first: the injector and anyone reading
	// toolgate-signing-keys know the new key before a bundle carries it.
	if err := PublishSigningKeys(ctx, r.direct, r.key.Namespace, ring); err != nil {
		return ctrl.Result{}, err
	}
	r.keys.Swap(ring)
	ctrl.LoggerFrom(ctx).Info("signing keys reloaded", "key", ring.Current().ID(), "trusted", ring.Trusted().IDs())
	return ctrl.Result{}, nil
}

// invalid reports a key Secret that cannot be used, and keeps the keyring.
func (r *signingKeyReloader) invalid(s *corev1.Secret, err error) {
	signingKeysValid.Set(0)
	kept := r.keys.Load().Current().ID()
	ctrl.Log.WithName("signing").Error(err, "the signing keys are invalid; still signing with the last valid keyring", "key", kept)
	note := fmt.Sprintf("%v; still signing with the last valid keyring (key %s)", err, kept)
	if len(note) > maxEventNote {
		note = strings.ToValidUTF8(note[:maxEventNote-3], "") + "..."
	}
	r.recorder.Eventf(s, nil, corev1.EventTypeWarning, v1alpha1.ReasonSigningKeysInvalid, "Reload", "%s", note)
}
