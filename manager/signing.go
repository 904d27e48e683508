package manager

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
)

// The key Secret is created on first start (create cannot be narrowed by
// name), then read and watched by name (the informer's field selector lets
// RBAC name it); the manager never writes it again.
// +kubebuilder:rbac:groups="",namespace=toolgate-system,resources=secrets,verbs=create
// +kubebuilder:rbac:groups="",namespace=toolgate-system,resources=secrets,resourceNames=toolgate-signing-key,verbs=get;list;watch

// signingTimeout bounds the key Secret and ConfigMap calls at start.
const signingTimeout = 30 * time.Second

// SigningOptions say where the operator keeps its bundle signing keys.
type SigningOptions struct {
	// Namespace holds the key Secret and the published public keys: the
	// manager's own. Empty means $POD_NAMESPACE; when that is empty too
	// (outside a cluster), bundles are published unsigned.
	Namespace string
	// SecretName is the Secret holding the private keys.
	SecretName string
}

func (s SigningOptions) namespace() string {
	if s.Namespace != "" {
		return s.Namespace
	}
	return os.Getenv("POD_NAMESPACE")
}

// EnsureSigningKeys returns the keyring in the Secret ns/name, creating the
// Secret with one new key when it does not exist. Replicas starting
// together all create-if-absent and then read, so they sign with the one
// key whose create won.
func EnsureSigningKeys(ctx context.Context, c client.Client, ns, name string) (*bundle.Keyring, error) {
	key := types.NamespacedName{Namespace: ns, Name: name}
	var s corev1.Secret
	err := c.Get(ctx, key, &s)
	if apierrors.IsNotFound(err) {
		k, gerr := bundle.GenerateSigningKey()
		if gerr != nil {
			return nil, gerr
		}
		r, _ := bundle.NewKeyring([]bundle.SigningKey{k})
		s = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue}},
			Type: corev1.SecretTypeOpaque, Data: map[string][]byte{bundle.SigningKeySecretKey: r.PrivatePEM()}}
		if err = c.Create(ctx, &s); apierrors.IsAlreadyExists(err) {
			err = c.Get(ctx, key, &s) // another replica won
		}
	}
	if err != nil {
		return nil, fmt.Errorf("the signing key Secret %s: %w", key, err)
	}
	r, err := bundle.ParseKeyring(s.Data[bundle.SigningKeySecretKey])
	if err != nil {
		return nil, fmt.Errorf("the signing key Secret %s, key %s: %w", key, bundle.SigningKeySecretKey, err)
	}
	return r, nil
}

// PublishSigningKeys makes the ConfigMap bundle.SigningKeysConfigMapName in
// ns carry every public key of r (keys.pem), writing only when it differs.
func PublishSigningKeys(ctx context.Context, c client.Client, ns string, r *bundle.Keyring) error {
	want := string(r.PublicPEM())
	key := types.NamespacedName{Namespace: ns, Name: bundle.SigningKeysConfigMapName}
	var cm corev1.ConfigMap
	err := c.Get(ctx, key, &cm)
	if apierrors.IsNotFound(err) {
		cm = corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: key.Name,
			Labels: map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue}},
			Data: map[string]string{bundle.SigningKeysKey: want}}
		if err = c.Create(ctx, &cm); !apierrors.IsAlreadyExists(err) {
			return wrapPublishKeys(key, err)
		}
		err = c.Get(ctx, key, &cm)
	}
	if err != nil {
		return wrapPublishKeys(key, err)
	}
	if cm.Data[bundle.SigningKeysKey] == want && len(cm.Data) == 1 && len(cm.BinaryData) == 0 {
		return nil
	}
	cm.Data, cm.BinaryData = map[string]string{bundle.SigningKeysKey: want}, nil
	return wrapPublishKeys(key, c.Update(ctx, &cm))
}

func wrapPublishKeys(key types.NamespacedName, err error) error {
	if err != nil {
		return fmt.Errorf("publishing the signing keys in ConfigMap %s: %w", key, err)
	}
	return nil
}

// Key rotation steps, for RotateSigningKeys. Running managers watch the
// key Secret and take each step at once: no restart.
const (
	// RotateAdd appends a new key: published, and handed to the sidecars
	// of Pods admitted from then on, not signing yet.
	RotateAdd = "add"
	// RotatePromote makes the key given sign (first in the Secret): every
	// bundle is re-signed with it, endorsed by the other keys, so sidecars
	// admitted before it was added accept it.
	RotatePromote = "promote"
	// RotateRetire removes a key that no longer signs. It is refused while
	// a bundle still carries the key's signature, unless forced.
	RotateRetire = "retire"
)

// RotateSigningKeys changes the key Secret ns/name by one step and returns
// the keyring it now holds. force retires a key even while bundles still
// carry its signature.
func RotateSigningKeys(ctx context.Context, c client.Client, ns, name, step, keyID string, force bool) (*bundle.Keyring, error) {
	var s corev1.Secret
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &s); err != nil {
		return nil, fmt.Errorf("the signing key Secret %s/%s: %w", ns, name, err)
	}
	r, err := bundle.ParseKeyring(s.Data[bundle.SigningKeySecretKey])
	if err != nil {
		return nil, fmt.Errorf("the signing key Secret %s/%s: %w", ns, name, err)
	}
	keys := r.Keys()
	find := func() (int, error) {
		for i, k := range keys {
			if k.ID() == keyID {
				return i, nil
			}
		}
		ids := make([]string, len(keys))
		for i, k := range keys {
			ids[i] = k.ID()
		}
		return 0, fmt.Errorf("no key %q in %s/%s (it holds %v)", keyID, ns, name, ids)
	}
	switch step {
	case RotateAdd:
		k, err := bundle.GenerateSigningKey()
		if err != nil {
			return nil, err
		}
		keys = append(keys, k)
	case RotatePromote:
		i, err := find()
		if err != nil {
			return nil, err
		}
		keys = append([]bundle.SigningKey{keys[i]}, append(keys[:i:i], keys[i+1:]...)...)
	case RotateRetire:
		i, err := find()
		if err != nil {
			return nil, err
		}
		if i == 0 {
			return nil, fmt.Errorf("key %s signs: promote another key first", keyID)
		}
		if !force {
			if err := refuseWhileSigning(ctx, c, r.Trusted(), keyID); err != nil {
				return nil, err
			}
		}
		keys = append(keys[:i:i], keys[i+1:]...)
	default:
		return nil, fmt.Errorf("rotation step %q: want %s, %s or %s", step, RotateAdd, RotatePromote, RotateRetire)
	}
	if r, err = bundle.NewKeyring(keys); err != nil {
		return nil, err
	}
	if bytes.Equal(s.Data[bundle.SigningKeySecretKey], r.PrivatePEM()) {
		return r, nil
	}
	s.Data[bundle.SigningKeySecretKey] = r.PrivatePEM()
	if err := c.Update(ctx, &s); err != nil {
		return nil, fmt.Errorf("updating the signing key Secret %s/%s: %w", ns, name, err)
	}
	return r, nil
}

// refuseWhileSigning fails while a bundle ConfigMap anywhere in the
// cluster (every one the operator writes carries v1alpha1.BundleLabel)
// carries a signature by keyID that trusted verifies: sidecars of that
// namespace would keep its bundle, but a sidecar restarting without the
// retired key would refuse it. A signature that does not verify (a forgery
// naming the key) does not hold the step back.
func refuseWhileSigning(ctx context.Context, c client.Client, trusted *bundle.TrustedKeys, keyID string) error {
	var cms corev1.ConfigMapList
	if err := c.List(ctx, &cms, client.MatchingLabels{v1alpha1.BundleLabel: "true"}); err != nil {
		return fmt.Errorf("checking that no bundle is still signed by %s (or retire with --force): %w", keyID, err)
	}
	var still []string
	for _, cm := range cms.Items {
		s, err := trusted.VerifyStatement([]byte(cm.Data[bundle.SignatureKey]), cm.Namespace)
		if err == nil && s.KeyID == keyID {
			still = append(still, cm.Namespace)
		}
	}
	if len(still) > 0 {
		slices.Sort(still)
		return fmt.Errorf("key %s still signs the bundles of %d namespaces (%s): a running manager re-signs them within seconds of promote; try again, or retire with --force",
			keyID, len(still), strings.Join(still, ", "))
	}
	return nil
}
