package sidecar

import (
	"encoding/json"
	"testing"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/bundlesource"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
)

// A key rotation seen by a sidecar admitted before the new key was added:
// it trusts the old key alone (its --trusted-keys-pem was fixed at
// admission). The operator, after promote, signs with the new key and
// publishes the new key endorsed by the old one (bundle.endorsements).

// promoted is the operator's keyring after add and promote: the new key
// signs, the old (the first of old) still endorses it.
func promoted(t *testing.T, old *bundle.Keyring) *bundle.Keyring {
	t.Helper()
	ring, err := bundle.NewKeyring([]bundle.SigningKey{testenv.Keyring(t, 1).Current(), old.Current()})
	must(t, err)
	return ring
}

// sealedBy is what the operator publishes with ring: the document, its
// signature and, when ring has several keys, the endorsements.
func sealedBy(t *testing.T, ring *bundle.Keyring, b engine.Bundle, counter uint64) (map[string][]byte, string) {
	t.Helper()
	files, rev := signed(t, ring.Current(), signedNS, b, counter)
	if e := ring.Endorsements(); e != nil {
		files[bundle.EndorsementsKey] = e
	}
	return files, rev
}

func TestKeyPromotedAfterAdmissionIsAcceptedThroughItsEndorsement(t *testing.T) {
	old := testenv.Keyring(t, 1)
	k, base, _, _ := startWithGoodBundle(t, old)
	ring := promoted(t, old)
	files, rev := sealedBy(t, ring, denyTools("Bash", "Read"), 11)
	k.Publish(files)
	eventually(t, "the bundle signed by the endorsed key", func() bool { return readyRevision(t, base) == rev })
	if got := toolDecision(t, base, "Read"); got != "deny" {
		t.Fatalf("Read under the new key's bundle: %s", got)
	}
	if n := metricValue(t, base, "toolgate_sidecar_bundle_rejected_total"); n != 0 {
		t.Fatalf("%v bundles refused during the rotation, want 0", n)
	}
}

// Endorsements beside a signature the sidecar trusts change nothing: what
// a sidecar given both keys (or the old sidecars, which read neither the
// data key nor the file) sees.
func TestEndorsementsBesideATrustedSignatureChangeNothing(t *testing.T) {
	old := testenv.Keyring(t, 1)
	ring := promoted(t, old)
	k, base := signedSidecar(t, ring.PublicPEM())
	files, rev := sealedBy(t, ring, denyTools("Bash"), 5)
	k.Publish(files)
	eventually(t, "the bundle", func() bool { return readyRevision(t, base) == rev })
	// Garbage endorsements do not matter either: the key is trusted.
	files, rev = sealedBy(t, ring, denyTools("Read"), 6)
	files[bundle.EndorsementsKey] = []byte("not an endorsement")
	k.Publish(files)
	eventually(t, "the next bundle", func() bool { return readyRevision(t, base) == rev })
}

func TestCachedEndorsedBundleIsVerifiedAtStart(t *testing.T) {
	old := testenv.Keyring(t, 1)
	o := fileOnlyOptions()
	o.BundleDir, o.BundleNamespace, o.CacheDir = t.TempDir(), signedNS, t.TempDir()
	o.TrustedKeys = writeFile(t, "keys.pem", old.PublicPEM())
	s, err := New(o)
	must(t, err)
	files, rev := sealedBy(t, promoted(t, old), denyTools("Bash"), 3)
	must(t, s.loader.LoadSealed(files[bundle.Key], false, bundlesource.Seal{Sig: files[bundle.SignatureKey], Endorsements: files[bundle.EndorsementsKey]}, bundlesource.OriginBundleDir))
	must(t, s.Close(t.Context()))

	restarted, err := New(o)
	must(t, err)
	defer func() { _ = restarted.Close(t.Context()) }()
	restarted.loader.LoadCache()
	if restarted.Revision() != rev {
		t.Fatalf("the cached bundle accepted through its endorsement did not load at start: serving %q", restarted.Revision())
	}
}

func TestAttackBundleEndorsedByAnUntrustedKeyIsRefused(t *testing.T) {
	old := testenv.Keyring(t, 1)
	k, base, _, rev := startWithGoodBundle(t, old)
	// The attacker makes a keyring of their own: their signing key
	// endorsed by another of their keys.
	files, _ := sealedBy(t, testenv.Keyring(t, 2), allowAll(), 1<<40)
	k.Publish(files)
	expectRefused(t, base, bundlesource.ReasonBadEndorsement, rev)
}

func TestAttackEndorsementOfAnotherKeyIsRefused(t *testing.T) {
	old := testenv.Keyring(t, 1)
	k, base, _, rev := startWithGoodBundle(t, old)
	// The operator's genuine endorsement (of its promoted key) copied
	// beside a bundle the attacker signed.
	genuine := promoted(t, old).Endorsements()
	files, _ := signed(t, testenv.Keyring(t, 1).Current(), signedNS, allowAll(), 1<<40)
	files[bundle.EndorsementsKey] = genuine
	k.Publish(files)
	expectRefused(t, base, bundlesource.ReasonBadEndorsement, rev)
}

func TestAttackTamperedEndorsementIsRefused(t *testing.T) {
	old := testenv.Keyring(t, 1)
	k, base, _, rev := startWithGoodBundle(t, old)
	attacker := testenv.Keyring(t, 1).Current()
	files, _ := signed(t, attacker, signedNS, allowAll(), 1<<40)
	// The operator's endorsement, its endorsed key replaced by the
	// attacker's: the old key's signature no longer holds.
	var e bundle.KeyEndorsements
	must(t, json.Unmarshal(promoted(t, old).Endorsements(), &e))
	e.KeyID, e.PublicKey = attacker.ID(), attacker.Public()
	forged, err := json.Marshal(e)
	must(t, err)
	files[bundle.EndorsementsKey] = forged
	k.Publish(files)
	expectRefused(t, base, bundlesource.ReasonBadEndorsement, rev)
}
