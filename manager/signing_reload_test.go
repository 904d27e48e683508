package manager

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/sidecar"
)

// reSignBound is how long a running manager may take to re-sign a bundle
// after a key Secret change: the Secret's watch event, the public keys'
// write, then one reconcile per namespace. Measured on envtest at well
// under a second; the bound leaves room for a loaded machine.
const reSignBound = 5 * time.Second

// endorsedSignature verifies ns's bundle as a sidecar trusting trusted
// alone does: through the endorsements when the key is not trusted.
func endorsedSignature(t *testing.T, ns string, trusted *bundle.TrustedKeys) (bundle.Signature, error) {
	t.Helper()
	var cm corev1.ConfigMap
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: bundle.DefaultConfigMapName}, &cm); err != nil {
		return bundle.Signature{}, err
	}
	var end []byte
	if e, ok := cm.Data[bundle.EndorsementsKey]; ok {
		end = []byte(e)
	}
	return trusted.VerifyEndorsed([]byte(cm.Data[bundle.SignatureKey]), end, ns, cm.Annotations[v1alpha1.RevisionAnnotation])
}

// strayBundle writes, in a namespace this manager does not manage, a
// bundle ConfigMap as the operator labels it, signed by key: one a
// manager restricted to other namespaces has stopped re-signing.
func strayBundle(t *testing.T, key bundle.SigningKey) (string, *corev1.ConfigMap) {
	t.Helper()
	ns := testenv.Namespace(t, k8s, "mgr-")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: bundle.DefaultConfigMapName,
		Labels: map[string]string{v1alpha1.BundleLabel: "true", v1alpha1.ManagedByLabel: v1alpha1.ManagedByValue}},
		Data: map[string]string{bundle.SignatureKey: string(key.Sign(ns, "sha256:00", 1))}}
	must(t, k8s.Create(context.Background(), cm))
	return ns, cm
}

// TestKeyRotationWithoutRestart runs add, promote and retire against one
// running manager, with a real --configmap sidecar that trusts only the
// first key (as one admitted before the rotation does). The bundle is
// re-signed within seconds of promote, the sidecar keeps serving, and a
// policy change made after promote reaches it: it accepted the new key
// through its endorsement.
func TestKeyRotationWithoutRestart(t *testing.T) {
	sns, ns := testenv.Namespace(t, k8s, "mgr-"), testenv.Namespace(t, k8s, "mgr-")
	ctx := context.Background()
	runInBackground(t, signingOptions(t, sns, ns))
	createPolicy(t, ns, "p")
	firstKeys := publishedKeys(t, sns)
	old := secretKeyring(t, sns).Current()
	oldOnly := secretKeyring(t, sns).Trusted()
	testenv.Eventually(t, "the first signed bundle", func() (bool, string) {
		_, err := bundleSignature(t, ns, oldOnly)
		return err == nil, fmt.Sprint(err)
	})
	o := sidecar.DefaultOptions()
	o.ConfigMap, o.TrustedKeysPEM, o.CacheDir = ns+"/"+bundle.DefaultConfigMapName, string(firstKeys), t.TempDir()
	base := runSidecar(t, o)
	rev := bundleRevision(t, ns)
	testenv.Eventually(t, "the sidecar serving the first key's bundle", func() (bool, string) {
		r := sidecarReadyz(t, base)
		return r.Ready && r.BundleRevision == rev, fmt.Sprintf("%+v", r)
	})

	ring, err := RotateSigningKeys(ctx, k8s, sns, bundle.SigningKeySecretName, RotateAdd, "", false)
	must(t, err)
	next := ring.Keys()[1]
	testenv.Eventually(t, "both keys published by the running manager", func() (bool, string) {
		return string(publishedKeys(t, sns)) == string(ring.PublicPEM()), "not yet"
	})

	_, err = RotateSigningKeys(ctx, k8s, sns, bundle.SigningKeySecretName, RotatePromote, next.ID(), false)
	must(t, err)
	promoted := time.Now()
	testenv.Eventually(t, "the bundle re-signed with the new key, endorsed by the old", func() (bool, string) {
		s, err := endorsedSignature(t, ns, oldOnly)
		return err == nil && s.KeyID == next.ID(), fmt.Sprint(s.KeyID, err)
	})
	took := time.Since(promoted)
	t.Logf("re-signed %v after promote", took.Round(time.Millisecond))
	if took > reSignBound {
		t.Fatalf("re-signed %v after promote, want within %v", took, reSignBound)
	}
	createPolicy(t, ns, "q")
	testenv.Eventually(t, "the sidecar serving the new key's new bundle", func() (bool, string) {
		r := sidecarReadyz(t, base)
		return r.Ready && r.BundleRevision != rev && r.BundleRevision == bundleRevision(t, ns), fmt.Sprintf("%+v", r)
	})
	if r := sidecarReadyz(t, base); r.LastRejected != nil {
		t.Fatalf("the sidecar refused a bundle during the rotation: %+v (%s)", r, rejectedTotal(t, base))
	}

	if got := rejectedTotal(t, base); got != "" {
		t.Fatalf("bundles refused during add and promote: %s", got)
	}
	served := sidecarReadyz(t, base).BundleRevision

	// Retire is refused while a bundle still carries the old key's
	// signature, naming where.
	stray, cm := strayBundle(t, old)
	_, err = RotateSigningKeys(ctx, k8s, sns, bundle.SigningKeySecretName, RotateRetire, old.ID(), false)
	if err == nil || !strings.Contains(err.Error(), stray) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("retiring a key that still signs %s: %v, want a refusal naming it", stray, err)
	}
	if got := len(secretKeyring(t, sns).Keys()); got != 2 {
		t.Fatalf("the refused retire left %d keys", got)
	}
	// Re-signed with the new key, it no longer holds the step back.
	cm.Data[bundle.SignatureKey] = string(next.Sign(stray, "sha256:00", 2))
	must(t, k8s.Update(ctx, cm))
	_, err = RotateSigningKeys(ctx, k8s, sns, bundle.SigningKeySecretName, RotateRetire, old.ID(), false)
	must(t, err)
	testenv.Eventually(t, "only the new key published", func() (bool, string) {
		trusted, err := bundle.ParseTrustedKeys(publishedKeys(t, sns))
		return err == nil && len(trusted.IDs()) == 1 && trusted.IDs()[0] == next.ID(), fmt.Sprint(err)
	})
	// What docs/signing.md says of retire: the bundles now carry no endorsement
	// by the retired key, so a sidecar trusting only it refuses the
	// re-signed ConfigMap and keeps serving its last good bundle (the Pods
	// admitted before add are to be re-created before retire).
	testenv.Eventually(t, "the endorsement-less bundle refused as unknown_key", func() (bool, string) {
		return strings.Contains(rejectedTotal(t, base), `reason="unknown_key"`), rejectedTotal(t, base)
	})
	if r := sidecarReadyz(t, base); !r.Ready || r.BundleRevision != served {
		t.Fatalf("after retire the sidecar reports %+v, want ready on %s", r, served)
	}
}

func TestRetireForceOverridesBundlesStillSigned(t *testing.T) {
	sns := testenv.Namespace(t, k8s, "mgr-")
	ctx := context.Background()
	_, err := EnsureSigningKeys(ctx, k8s, sns, bundle.SigningKeySecretName)
	must(t, err)
	ring, err := RotateSigningKeys(ctx, k8s, sns, bundle.SigningKeySecretName, RotateAdd, "", false)
	must(t, err)
	old, next := ring.Keys()[0], ring.Keys()[1]
	_, err = RotateSigningKeys(ctx, k8s, sns, bundle.SigningKeySecretName, RotatePromote, next.ID(), false)
	must(t, err)
	strayBundle(t, old)
	// A forgery naming the new key does not hold its retirement back.
	forger := testenv.Keyring(t, 1).Current()
	forged, _ := strayBundle(t, forger)
	var cm corev1.ConfigMap
	must(t, k8s.Get(ctx, types.NamespacedName{Namespace: forged, Name: bundle.DefaultConfigMapName}, &cm))
	cm.Data[bundle.SignatureKey] = strings.Replace(cm.Data[bundle.SignatureKey], forger.ID(), old.ID(), 1)
	must(t, k8s.Update(ctx, &cm))
	if _, err := RotateSigningKeys(ctx, k8s, sns, bundle.SigningKeySecretName, RotateRetire, old.ID(), false); err == nil || strings.Contains(err.Error(), forged) {
		t.Fatalf("retire: %v, want refused for the genuine bundle only", err)
	}
	r, err := RotateSigningKeys(ctx, k8s, sns, bundle.SigningKeySecretName, RotateRetire, old.ID(), true)
	must(t, err)
	if len(r.Keys()) != 1 || r.Current().ID() != next.ID() {
		t.Fatalf("forced retire left %v", r.Trusted().IDs())
	}
}

// warningEvents counts the SigningKeysInvalid events on the key Secret
// whose note contains each of notes.
func warningEvents(t *testing.T, sns string, notes ...string) int {
	t.Helper()
	var evs eventsv1.EventList
	must(t, k8s.List(context.Background(), &evs, client.InNamespace(sns)))
	n := 0
	for _, e := range evs.Items {
		if e.Regarding.Kind == "Secret" && e.Regarding.Name == bundle.SigningKeySecretName &&
			e.Reason == v1alpha1.ReasonSigningKeysInvalid && e.Type == corev1.EventTypeWarning &&
			!slices.ContainsFunc(notes, func(n string) bool { return !strings.Contains(e.Note, n) }) {
			n++
		}
	}
	return n
}

// TestAttackGarbageInTheKeySecretKeepsTheLastValidKeyring: whoever can
// write the key Secret (or a mistake) puts garbage in it, then deletes it.
// The running manager keeps signing with the last valid keyring, never
// publishes unsigned, and says so (event, metric); a valid Secret put back
// is taken at once.
func TestAttackGarbageInTheKeySecretKeepsTheLastValidKeyring(t *testing.T) {
	sns, ns := testenv.Namespace(t, k8s, "mgr-"), testenv.Namespace(t, k8s, "mgr-")
	ctx := context.Background()
	runInBackground(t, signingOptions(t, sns, ns))
	createPolicy(t, ns, "p")
	publishedKeys(t, sns)
	kept := secretKeyring(t, sns)
	signedByKept := func(why string) {
		t.Helper()
		testenv.Eventually(t, why, func() (bool, string) {
			s, err := bundleSignature(t, ns, kept.Trusted())
			return err == nil && s.Revision == bundleRevision(t, ns), fmt.Sprint(err)
		})
	}
	signedByKept("the first signed bundle")

	var s corev1.Secret
	must(t, k8s.Get(ctx, types.NamespacedName{Namespace: sns, Name: bundle.SigningKeySecretName}, &s))
	s.Data[bundle.SigningKeySecretKey] = []byte("-----BEGIN PRIVATE KEY-----\ngarbage\n-----END PRIVATE KEY-----\n")
	must(t, k8s.Update(ctx, &s))
	testenv.Eventually(t, "a Warning event on the key Secret and the metric at 0", func() (bool, string) {
		return warningEvents(t, sns) > 0 && testutil.ToFloat64(signingKeysValid) == 0,
			fmt.Sprintf("%d events, toolgate_signing_keys_valid %v", warningEvents(t, sns), testutil.ToFloat64(signingKeysValid))
	})
	createPolicy(t, ns, "after-garbage")
	signedByKept("a new bundle signed with the last valid keyring")

	// Events are written asynchronously: the deleted Secret's is told
	// from the garbage's by its note, not by a count taken after the delete.
	must(t, k8s.Delete(ctx, &s))
	testenv.Eventually(t, "a Warning event for the deleted Secret", func() (bool, string) {
		return warningEvents(t, sns, "was deleted", "still signing with the last valid keyring") > 0, "none"
	})
	createPolicy(t, ns, "after-delete")
	signedByKept("a new bundle signed with the last valid keyring")
	if got := string(publishedKeys(t, sns)); got != string(kept.PublicPEM()) {
		t.Fatalf("the published keys changed while the Secret was invalid:\n%s", got)
	}

	// A valid Secret put back is taken without a restart.
	fresh := testenv.Keyring(t, 1)
	must(t, k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sns, Name: bundle.SigningKeySecretName},
		Data: map[string][]byte{bundle.SigningKeySecretKey: fresh.PrivatePEM()}}))
	testenv.Eventually(t, "the bundle re-signed with the restored Secret's key and the metric at 1", func() (bool, string) {
		_, err := bundleSignature(t, ns, fresh.Trusted())
		return err == nil && testutil.ToFloat64(signingKeysValid) == 1, fmt.Sprint(err, testutil.ToFloat64(signingKeysValid))
	})
}
