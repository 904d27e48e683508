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
	ns := testenv.Namespace(t, k8s, "tg-")
	key := newSigningKey(t)
	opts := controllers.Options{Keys: controllers.NewSigningKeys(signingKeys(t, key))}
	mgr := startManager(t, opts, ns)
	settled(t, ns)
	first, _ := signatureOf(t, ns, opts.Keys.Load().Trusted())
	if first.KeyID != key.ID() {
		t.Fatalf("signed by %s, want %s", first.KeyID, key.ID())
	}

	// Re-reconciles of unchanged content: the same signature, no write.
	republishWritesNothing(t, mgr, opts, ns, "re-signing unchanged content")

	// A new leader with the same key continues from the ConfigMap's counter.
	mgr.stop()
	second := startManager(t, opts, ns)
	create(t, policy(ns, "another", 1))
	testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "the second policy", func(b engine.Bundle) bool { return len(b.Policies) == 2 })
	next, _ := signatureOf(t, ns, opts.Keys.Load().Trusted())
	if next.Counter <= first.Counter {
		t.Fatalf("publish counter %d after %d: it must grow across leaders", next.Counter, first.Counter)
	}
	_ = second
}

func TestAttackForgedCounterInTheConfigMapIsNotBuiltOn(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-")
	opts := controllers.Options{Keys: controllers.NewSigningKeys(signingKeys(t, newSigningKey(t)))}
	startManager(t, opts, ns)
	settled(t, ns)
	genuine, cm := signatureOf(t, ns, opts.Keys.Load().Trusted())

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
		got, err := opts.Keys.Load().Trusted().Verify([]byte(cm.Data[bundle.SignatureKey]), ns, cm.Annotations[v1alpha1.RevisionAnnotation])
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
	ns := testenv.Namespace(t, k8s, "tg-")
	old, next := newSigningKey(t), newSigningKey(t)
	first := startManager(t, controllers.Options{Keys: controllers.NewSigningKeys(signingKeys(t, old))}, ns)
	b := settled(t, ns)
	before, _ := signatureOf(t, ns, signingKeys(t, old).Trusted())
	first.stop()

	// The new key signs, the old one is still trusted.
	rotated := controllers.Options{Keys: controllers.NewSigningKeys(signingKeys(t, next, old))}
	startManager(t, rotated, ns)
	testenv.Eventually(t, "the bundle re-signed with the new key", func() (bool, string) {
		s, cm := signatureOf(t, ns, rotated.Keys.Load().Trusted())
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

// A keyring swapped under a running manager (the manager's key Secret
// reload) re-signs every namespace's bundle at once, with the new key's
// endorsement by the old one, which a sidecar trusting only the old key
// accepts; once the old key is gone the endorsements go too.
func TestSwappedKeyringReSignsEveryBundleWhileRunning(t *testing.T) {
	a, b := testenv.Namespace(t, k8s, "tg-"), testenv.Namespace(t, k8s, "tg-")
	old, next := newSigningKey(t), newSigningKey(t)
	keys := controllers.NewSigningKeys(signingKeys(t, old))
	startManager(t, controllers.Options{Keys: keys}, a, b)
	revs := map[string]string{a: settled(t, a).Revision, b: settled(t, b).Revision}
	oldOnly := signingKeys(t, old).Trusted()
	for ns := range revs {
		if _, cm := signatureOf(t, ns, oldOnly); cm.Data[bundle.EndorsementsKey] != "" {
			t.Fatalf("a keyring of one key published endorsements in %s", ns)
		}
	}

	keys.Swap(signingKeys(t, next, old))
	for ns, rev := range revs {
		testenv.Eventually(t, "the bundle of "+ns+" re-signed with the new key", func() (bool, string) {
			cm, _ := getBundleConfigMap(t, ns)
			s, err := oldOnly.VerifyEndorsed([]byte(cm.Data[bundle.SignatureKey]), []byte(cm.Data[bundle.EndorsementsKey]), ns, rev)
			if err != nil {
				return false, err.Error()
			}
			return s.KeyID == next.ID(), "signed by " + s.KeyID
		})
	}

	keys.Swap(signingKeys(t, next))
	for ns := range revs {
		testenv.Eventually(t, "the endorsements of "+ns+" dropped with the old key", func() (bool, string) {
			cm, _ := getBundleConfigMap(t, ns)
			_, has := cm.Data[bundle.EndorsementsKey]
			return !has, "still there"
		})
		signatureOf(t, ns, signingKeys(t, next).Trusted())
	}
}
