package manager

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
)

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

// Key rotation steps, for RotateSigningKeys.
const (
	// RotateAdd appends a new key: published and handed to sidecars
	// injected from the next manager start, not signing yet.
	RotateAdd = "add"
	// RotatePromote makes the key given sign (first in the Secret); every
	// bundle is re-signed with it at the next manager start.
	RotatePromote = "promote"
	// RotateRetire removes a key that no longer signs.
	RotateRetire = "retire"
)

// RotateSigningKeys changes the key Secret ns/name by one step and returns
// the keyring it now holds. Managers read the Secret at start: restart
// them after each step (kubectl rollout restart).
func RotateSigningKeys(ctx context.Context, c client.Client, ns, name, step, keyID string) (*bundle.Keyring, error) {
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
