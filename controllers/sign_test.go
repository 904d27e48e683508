package controllers_test

import (
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
)

func signingKeys(t *testing.T, keys ...bundle.SigningKey) *bundle.Keyring {
	t.Helper()
	r, err := bundle.NewKeyring(keys)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func newSigningKey(t *testing.T) bundle.SigningKey {
	t.Helper()
	k, err := bundle.GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// signatureOf verifies the bundle ConfigMap's signature as a sidecar
// trusting trusted would.
func signatureOf(t *testing.T, ns string, trusted *bundle.TrustedKeys) (bundle.Signature, *corev1.ConfigMap) {
	t.Helper()
	cm, ok := getBundleConfigMap(t, ns)
	if !ok {
		t.Fatal("no bundle ConfigMap")
	}
	s, err := trusted.Verify([]byte(cm.Data[bundle.SignatureKey]), ns, cm.Annotations[v1alpha1.RevisionAnnotation])
	if err != nil {
		t.Fatalf("the published signature does not verify: %v", err)
	}
	return s, cm
}

func TestPublishedBundlesAreSignedAndUnchangedOnesAreNotRewritten(t *testing.T) {
	ns := newNamespace(t)
	key := newSigningKey(t)
	opts := controllers.Options{Keys: signingKeys(t, key)}
	mgr := startManager(t, opts, ns)
	settled(t, ns)
	first, _ := signatureOf(t, ns, opts.Keys.Trusted())
	if first.KeyID != key.ID() {
		t.Fatalf("signed by %s, want %s", first.KeyID, key.ID())
	}

	// Re-reconciles of unchanged content: the same signature, no write.
	republishWritesNothing(t, mgr, opts, ns, "re-signing unchanged content")

	// A new leader with the same key continues from the ConfigMap's counter.
	mgr.stop()
	second := startManager(t, opts, ns)
	create(t, policy(ns, "another", 1))
	waitForBundle(t, ns, "the second policy", func(b engine.Bundle) bool { return len(b.Policies) == 2 })
	next, _ := signatureOf(t, ns, opts.Keys.Trusted())
	if next.Counter <= first.Counter {
		t.Fatalf("publish counter %d after %d: it must grow across leaders", next.Counter, first.Counter)
	}
	_ = second
}

func TestAttackForgedCounterInTheConfigMapIsNotBuiltOn(t *testing.T) {
	ns := newNamespace(t)
	opts := controllers.Options{Keys: signingKeys(t, newSigningKey(t))}
	startManager(t, opts, ns)
	settled(t, ns)
	genuine, cm := signatureOf(t, ns, opts.Keys.Trusted())

	// A namespace editor writes a signature claiming a huge counter. Were
	// the operator to continue from it, it would jump the counter by the
	// attacker's choice (up to overflow); it must only trust counters a
	// trusted key signed.
	var s bundle.Signature
	if err := json.Unmarshal([]byte(cm.Data[bundle.SignatureKey]), &s); err != nil {
		t.Fatal(err)
	}
	s.Counter = 1 << 62
	forged, _ := json.Marshal(s)
	cm.Data[bundle.SignatureKey] = string(forged)
	if err := k8s.Update(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the operator to repair the signature", func() (bool, string) {
		cm, _ := getBundleConfigMap(t, ns)
		got, err := opts.Keys.Trusted().Verify([]byte(cm.Data[bundle.SignatureKey]), ns, cm.Annotations[v1alpha1.RevisionAnnotation])
		if err != nil {
			return false, err.Error()
		}
		if got.Counter >= 1<<62 || got.Counter <= genuine.Counter {
			t.Fatalf("repaired with counter %d (genuine %d): the forged counter was built on, or the counter went back", got.Counter, genuine.Counter)
		}
		return true, ""
	})
}

func TestKeyRotationReSignsEveryBundleWithTheNewKey(t *testing.T) {
	ns := newNamespace(t)
	old, next := newSigningKey(t), newSigningKey(t)
	first := startManager(t, controllers.Options{Keys: signingKeys(t, old)}, ns)
	b := settled(t, ns)
	before, _ := signatureOf(t, ns, signingKeys(t, old).Trusted())
	first.stop()

	// The new key signs, the old one is still trusted.
	rotated := controllers.Options{Keys: signingKeys(t, next, old)}
	startManager(t, rotated, ns)
	testenv.Eventually(t, "the bundle re-signed with the new key", func() (bool, string) {
		s, cm := signatureOf(t, ns, rotated.Keys.Trusted())
		if cm.Annotations[v1alpha1.RevisionAnnotation] != b.Revision {
			t.Fatalf("rotation changed the content: %s, was %s", cm.Annotations[v1alpha1.RevisionAnnotation], b.Revision)
		}
		if s.KeyID != next.ID() {
			return false, "still signed by " + s.KeyID
		}
		if s.Counter <= before.Counter {
			t.Fatalf("re-signed with counter %d, not above %d", s.Counter, before.Counter)
		}
		return true, ""
	})
	// The old key may go now: the bundle verifies with the new one alone.
	signatureOf(t, ns, signingKeys(t, next).Trusted())
}
