package bundle

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// Endorsements. Sidecars get the operator's public keys once, at admission.
// When a key added later is promoted, a sidecar admitted before does not
// know it; rather than refuse every bundle until its Pod is re-created, it
// accepts the new key for a bundle when a key it does trust endorses it:
// the operator signs the current key's public key with every other key of
// its keyring and publishes that beside bundle.sig (EndorsementsKey).
//
// One level only: an endorsement is checked against the sidecar's own
// trusted keys, never against another endorsed key, and it makes the key
// trusted for verifying that one bundle's signature, nothing else (not the
// next endorsement, not the sidecar's trusted set).

// KeyEndorsements is the bundle.endorsements document.
type KeyEndorsements struct {
	// KeyID is the endorsed key's id: KeyID of PublicKey, and the key id
	// of the bundle.sig it travels with.
	KeyID string `json:"keyId"`
	// PublicKey is the endorsed Ed25519 public key (base64 in JSON).
	PublicKey []byte `json:"publicKey"`
	// Endorsements are its endorsements, one per other key of the keyring.
	Endorsements []Endorsement `json:"endorsements"`
}

// Endorsement is one key's signature of the endorsement statement.
type Endorsement struct {
	// KeyID names the endorsing key.
	KeyID string `json:"keyId"`
	// Sig is its Ed25519 signature of endorsementStatement (base64 in JSON).
	Sig []byte `json:"signature"`
}

// maxEndorsementsBytes bounds an endorsements document before it is
// parsed: about fifty endorsements, where a rotation has one or two.
const maxEndorsementsBytes = 8 << 10

// ErrBadEndorsement refuses a bundle signed by a key the sidecar does not
// trust whose endorsement does not hold.
var ErrBadEndorsement = fmt.Errorf("%w: the signing key's endorsement is refused", ErrSignature)

// endorsementStatement is the exact byte string an endorsing key signs. Its
// prefix differs from the bundle statement's, and it has newlines and "=",
// which SignJWS never signs: no endorsement can be read as a bundle
// signature or a JWS, nor the other way round.
func endorsementStatement(pub ed25519.PublicKey) []byte {
	var b bytes.Buffer
	b.WriteString("toolgate-key-endorsement-v1\n")
	b.WriteString("key=" + KeyID(pub) + "\n")
	b.WriteString("publicKey=" + hex.EncodeToString(pub) + "\n")
	return b.Bytes()
}

// Endorsements returns the bundle.endorsements document: the current key
// endorsed by every other key, in keyring order. Ed25519 is deterministic,
// so an unchanged keyring gives the same bytes. Nil when the keyring has
// one key: there is nothing to endorse it with.
func (r *Keyring) Endorsements() []byte {
	if len(r.keys) < 2 {
		return nil
	}
	cur := r.Current().Public()
	doc := KeyEndorsements{KeyID: KeyID(cur), PublicKey: cur}
	for _, k := range r.keys[1:] {
		doc.Endorsements = append(doc.Endorsements, Endorsement{KeyID: k.ID(), Sig: ed25519.Sign(k.priv, endorsementStatement(cur))})
	}
	out, err := json.Marshal(doc)
	if err != nil {
		panic(err) // strings and bytes always encode
	}
	return out
}

// VerifyEndorsed is Verify, except that a bundle signed by a key that is
// not trusted is accepted when endorsements (the bundle.endorsements
// document, nil when there is none) endorse exactly that key with a
// trusted key. Errors wrap ErrSignature; a refused endorsement wraps
// ErrBadEndorsement.
func (t *TrustedKeys) VerifyEndorsed(sig, endorsements []byte, namespace, revision string) (Signature, error) {
	s, err := t.Verify(sig, namespace, revision)
	if !errors.Is(err, ErrUnknownKey) || endorsements == nil {
		return s, err
	}
	signed, err := parseSignature(sig) // it parsed in Verify: the key was unknown
	if err != nil {
		return Signature{}, err
	}
	pub, err := t.endorsed(endorsements, signed.KeyID)
	if err != nil {
		return Signature{}, err
	}
	only := &TrustedKeys{keys: map[string]ed25519.PublicKey{signed.KeyID: pub}, order: []string{signed.KeyID}}
	return only.Verify(sig, namespace, revision)
}

// endorsed returns the public key of keyID when doc endorses it with one of
// t's keys.
func (t *TrustedKeys) endorsed(doc []byte, keyID string) (ed25519.PublicKey, error) {
	e, err := ParseEndorsements(doc)
	if err != nil {
		return nil, err
	}
	if e.KeyID != keyID {
		return nil, fmt.Errorf("%w: it endorses key %s, the bundle is signed by %s", ErrBadEndorsement, e.KeyID, keyID)
	}
	pub := ed25519.PublicKey(e.PublicKey)
	var untrusted []string
	for _, en := range e.Endorsements {
		by, ok := t.keys[en.KeyID]
		if !ok {
			untrusted = append(untrusted, en.KeyID)
			continue
		}
		if !ed25519.Verify(by, endorsementStatement(pub), en.Sig) {
			return nil, fmt.Errorf("%w: the endorsement by %s does not verify", ErrBadEndorsement, en.KeyID)
		}
		return pub, nil
	}
	return nil, fmt.Errorf("%w: key %s is endorsed only by keys that are not trusted (%v; trusted: %v)", ErrBadEndorsement, keyID, untrusted, t.order)
}

// ParseEndorsements reads a bundle.endorsements document strictly: within
// its size bound, no unknown field, nothing after it, a public key whose id
// is KeyID, and at least one endorsement, each with a key id and a
// signature of the Ed25519 size. Errors wrap ErrBadEndorsement.
func ParseEndorsements(doc []byte) (KeyEndorsements, error) {
	if len(doc) > maxEndorsementsBytes {
		return KeyEndorsements{}, fmt.Errorf("%w: %d bytes, more than %d", ErrBadEndorsement, len(doc), maxEndorsementsBytes)
	}
	var e KeyEndorsements
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		return KeyEndorsements{}, fmt.Errorf("%w: %s is not an endorsements document: %v", ErrBadEndorsement, EndorsementsKey, err)
	}
	if rest := bytes.TrimSpace(doc[dec.InputOffset():]); len(rest) > 0 {
		return KeyEndorsements{}, fmt.Errorf("%w: %d bytes after the %s document", ErrBadEndorsement, len(rest), EndorsementsKey)
	}
	switch {
	case len(e.PublicKey) != ed25519.PublicKeySize:
		return KeyEndorsements{}, fmt.Errorf("%w: the public key is %d bytes, not %d", ErrBadEndorsement, len(e.PublicKey), ed25519.PublicKeySize)
	case KeyID(e.PublicKey) != e.KeyID:
		return KeyEndorsements{}, fmt.Errorf("%w: key id %q is not the public key's (%s)", ErrBadEndorsement, e.KeyID, KeyID(e.PublicKey))
	case len(e.Endorsements) == 0:
		return KeyEndorsements{}, fmt.Errorf("%w: no endorsement", ErrBadEndorsement)
	}
	for i, en := range e.Endorsements {
		if en.KeyID == "" || len(en.Sig) != ed25519.SignatureSize {
			return KeyEndorsements{}, fmt.Errorf("%w: endorsement %d: key id %q and a %d-byte signature, want a key id and %d bytes",
				ErrBadEndorsement, i+1, en.KeyID, len(en.Sig), ed25519.SignatureSize)
		}
	}
	return e, nil
}
