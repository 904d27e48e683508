package bundle_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/internal/testenv"
)

// rotated is a keyring after `promote`: the new key signs, the old one,
// which older sidecars trust alone, endorses it.
func rotated(t *testing.T) (ring *bundle.Keyring, old *bundle.TrustedKeys) {
	t.Helper()
	first := testenv.Keyring(t, 1)
	next := testenv.Keyring(t, 1).Current()
	ring, err := bundle.NewKeyring([]bundle.SigningKey{next, first.Current()})
	if err != nil {
		t.Fatal(err)
	}
	return ring, first.Trusted()
}

func TestEndorsedKeyVerifiesForOlderSidecars(t *testing.T) {
	ring, old := rotated(t)
	sig := ring.Current().Sign("agents", "sha256:aa", 3)
	end := ring.Endorsements()
	if !bytes.Equal(end, ring.Endorsements()) {
		t.Fatal("endorsing the same keyring twice gave different bytes: every reconcile would rewrite the bundle")
	}
	if _, err := old.Verify(sig, "agents", "sha256:aa"); !errors.Is(err, bundle.ErrUnknownKey) {
		t.Fatalf("without the endorsement: %v, want unknown key", err)
	}
	s, err := old.VerifyEndorsed(sig, end, "agents", "sha256:aa")
	if err != nil || s.KeyID != ring.Current().ID() || s.Counter != 3 {
		t.Fatalf("VerifyEndorsed = %+v, %v", s, err)
	}
	// The endorsed key verifies the bundle's claims like a trusted one.
	for _, c := range []struct{ ns, rev string }{{"prod", "sha256:aa"}, {"agents", "sha256:bb"}} {
		if _, err := old.VerifyEndorsed(sig, end, c.ns, c.rev); !errors.Is(err, bundle.ErrSignature) {
			t.Fatalf("endorsed signature read for %s %s: %v, want refused", c.ns, c.rev, err)
		}
	}
	if testenv.Keyring(t, 1).Endorsements() != nil {
		t.Fatal("a keyring of one key has endorsements")
	}
}

func TestAttackEndorsementsThatDoNotHoldAreRefused(t *testing.T) {
	ring, old := rotated(t)
	sig := ring.Current().Sign("agents", "sha256:aa", 3)
	attacker, err := bundle.NewKeyring([]bundle.SigningKey{testenv.Keyring(t, 1).Current(), testenv.Keyring(t, 1).Current()})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name     string
		sig, end []byte
	}{
		// The attacker's key, endorsed by another of the attacker's keys.
		{"endorsed by an untrusted key", attacker.Current().Sign("agents", "sha256:aa", 9), attacker.Endorsements()},
		// A genuine endorsement, of the operator's key, beside a bundle
		// signed by the attacker's.
		{"endorsement for another key", attacker.Current().Sign("agents", "sha256:aa", 9), ring.Endorsements()},
		{"endorsed public key swapped", attacker.Current().Sign("agents", "sha256:aa", 9), editEndorsements(t, ring.Endorsements(), func(e *bundle.KeyEndorsements) {
			e.KeyID, e.PublicKey = attacker.Current().ID(), attacker.Current().Public()
		})},
		{"endorsement signature flipped", sig, editEndorsements(t, ring.Endorsements(), func(e *bundle.KeyEndorsements) {
			e.Endorsements[0].Sig[0] ^= 1
		})},
		{"endorser renamed", sig, editEndorsements(t, ring.Endorsements(), func(e *bundle.KeyEndorsements) {
			e.Endorsements[0].KeyID = attacker.Current().ID()
		})},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := old.VerifyEndorsed(c.sig, c.end, "agents", "sha256:aa")
			if !errors.Is(err, bundle.ErrBadEndorsement) || !errors.Is(err, bundle.ErrSignature) {
				t.Fatalf("VerifyEndorsed: %v, want %v", err, bundle.ErrBadEndorsement)
			}
		})
	}
	// An endorsement never stands in for a bundle signature, whatever
	// bytes it is given as.
	if _, err := old.VerifyEndorsed(ring.Endorsements(), ring.Endorsements(), "agents", "sha256:aa"); !errors.Is(err, bundle.ErrSignature) {
		t.Fatalf("an endorsements document read as bundle.sig: %v", err)
	}
}

func editEndorsements(t *testing.T, doc []byte, f func(*bundle.KeyEndorsements)) []byte {
	t.Helper()
	var e bundle.KeyEndorsements
	if err := json.Unmarshal(doc, &e); err != nil {
		t.Fatal(err)
	}
	f(&e)
	out, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestMalformedEndorsementsAreRefused(t *testing.T) {
	ring, _ := rotated(t)
	good := ring.Endorsements()
	if _, err := bundle.ParseEndorsements(good); err != nil {
		t.Fatalf("the operator's own endorsements: %v", err)
	}
	for _, c := range []struct {
		name, doc, want string
	}{
		{"too big", `{"keyId":"` + strings.Repeat("a", 9<<10) + `"}`, "more than"},
		{"unknown field", strings.Replace(string(good), `{"keyId"`, `{"trusted":true,"keyId"`, 1), "unknown field"},
		{"trailing data", string(good) + `{}`, "after the"},
		{"not JSON", "endorse me", "not an endorsements document"},
		{"empty", "", "not an endorsements document"},
		{"short public key", string(editEndorsements(t, good, func(e *bundle.KeyEndorsements) { e.PublicKey = e.PublicKey[:31] })), "31 bytes"},
		{"key id not the key's", string(editEndorsements(t, good, func(e *bundle.KeyEndorsements) { e.KeyID = "ed25519:0000000000000000" })), "is not the public key's"},
		{"no endorsement", string(editEndorsements(t, good, func(e *bundle.KeyEndorsements) { e.Endorsements = nil })), "no endorsement"},
		{"short signature", string(editEndorsements(t, good, func(e *bundle.KeyEndorsements) { e.Endorsements[0].Sig = e.Endorsements[0].Sig[:63] })), "63-byte"},
		{"no endorser", string(editEndorsements(t, good, func(e *bundle.KeyEndorsements) { e.Endorsements[0].KeyID = "" })), "key id"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := bundle.ParseEndorsements([]byte(c.doc))
			if !errors.Is(err, bundle.ErrBadEndorsement) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ParseEndorsements: %v, want %v saying %q", err, bundle.ErrBadEndorsement, c.want)
			}
		})
	}
}
