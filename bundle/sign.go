package bundle

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// Signing. The operator signs a statement about each bundle it publishes:
// which namespace it is for, which revision (the sha256 of the canonical
// document, so the revision stands for the content) and a publish counter
// that only grows. The statement travels beside the document (SignatureKey),
// so the document itself stays exactly what engine.Encode produces, and
// `toolgate bundle` output stays loadable unsigned.
//
// Like OPA's .signatures.json, what is signed is a digest of the content
// plus claims, and the verifier picks the key by key id from keys it was
// given out of band. Unlike OPA there is one algorithm (Ed25519: no
// algorithm field an attacker could choose) and the claims include the
// namespace and a counter, so a bundle can neither be replayed into another
// namespace nor rolled back to an older signed one.

// Signature is the bundle.sig document.
type Signature struct {
	// KeyID names the public key that verifies Sig (KeyID of that key).
	KeyID string `json:"keyId"`
	// Namespace is the namespace the bundle was published for.
	Namespace string `json:"namespace"`
	// Revision is the signed bundle's revision.
	Revision string `json:"revision"`
	// Counter grows with every publish in the namespace; a sidecar refuses
	// a bundle whose counter is lower than the one it serves.
	Counter uint64 `json:"counter"`
	// Sig is the Ed25519 signature of the statement (base64 in JSON).
	Sig []byte `json:"signature"`
}

// maxSignatureBytes bounds a signature document before it is parsed.
const maxSignatureBytes = 4 << 10

// Verification errors. Each wraps ErrSignature, so a reader can tell a
// refused signature from a corrupt document.
var (
	ErrSignature      = errors.New("bundle signature refused")
	ErrUnsigned       = fmt.Errorf("%w: the bundle is not signed", ErrSignature)
	ErrUnknownKey     = fmt.Errorf("%w: signed with a key that is not trusted", ErrSignature)
	ErrBadSignature   = fmt.Errorf("%w: the signature does not verify", ErrSignature)
	ErrWrongNamespace = fmt.Errorf("%w: signed for another namespace", ErrSignature)
)

// statement is the exact byte string signed. The prefix keeps a signature
// from ever being valid for anything else signed with the same key.
func statement(namespace, revision string, counter uint64) []byte {
	var b bytes.Buffer
	b.WriteString("toolgate-bundle-signature-v1\n")
	b.WriteString("namespace=" + namespace + "\n")
	b.WriteString("revision=" + revision + "\n")
	b.WriteString("counter=" + strconv.FormatUint(counter, 10) + "\n")
	return b.Bytes()
}

// KeyID is "ed25519:" and the first 16 hex digits of the sha256 of the
// public key.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return "ed25519:" + hex.EncodeToString(sum[:8])
}

// SigningKey is one Ed25519 private key.
type SigningKey struct {
	priv ed25519.PrivateKey
}

// GenerateSigningKey makes a new key from crypto/rand.
func GenerateSigningKey() (SigningKey, error) {
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return SigningKey{}, fmt.Errorf("generating a signing key: %w", err)
	}
	return SigningKey{priv: priv}, nil
}

// Public is the key's public half.
func (k SigningKey) Public() ed25519.PublicKey { return k.priv.Public().(ed25519.PublicKey) }

// ID is KeyID of the public half.
func (k SigningKey) ID() string { return KeyID(k.Public()) }

// Sign returns the bundle.sig document for a bundle of namespace. Ed25519
// is deterministic: equal inputs give byte-identical output, so a publisher
// re-signing unchanged content writes nothing new.
func (k SigningKey) Sign(namespace, revision string, counter uint64) []byte {
	s := Signature{KeyID: k.ID(), Namespace: namespace, Revision: revision, Counter: counter,
		Sig: ed25519.Sign(k.priv, statement(namespace, revision, counter))}
	out, err := json.Marshal(s)
	if err != nil {
		panic(err) // strings, a number and bytes always encode
	}
	return out
}

// SignJWS signs a compact JWS signing input (base64url header "."
// base64url payload) with EdDSA: the signature of an OPA bundle's
// .signatures.json (rego.Signer). It refuses anything else, so the key
// signs nothing that could be read as a bundle.sig statement (which has
// newlines and "=", never base64url text).
func (k SigningKey) SignJWS(signingInput []byte) ([]byte, error) {
	dots := 0
	for _, c := range signingInput {
		switch {
		case c == '.':
			dots++
		case c >= 'A' && c <= 'Z', c >= 'a' && c <= 'z', c >= '0' && c <= '9', c == '-', c == '_':
		default:
			return nil, fmt.Errorf("not a JWS signing input: byte %q", c)
		}
	}
	if dots != 1 {
		return nil, errors.New("not a JWS signing input: want header.payload")
	}
	return ed25519.Sign(k.priv, signingInput), nil
}

// Keyring is the operator's keys: the first signs, every one is published
// as trusted (previous keys until every bundle is re-signed, next keys
// before they sign, so sidecars given them at admission accept them).
type Keyring struct {
	keys []SigningKey
}

// NewKeyring keeps keys in order; keys[0] signs. It needs at least one key
// and no key twice.
func NewKeyring(keys []SigningKey) (*Keyring, error) {
	if len(keys) == 0 {
		return nil, errors.New("a keyring needs at least one signing key")
	}
	seen := map[string]bool{}
	for _, k := range keys {
		if seen[k.ID()] {
			return nil, fmt.Errorf("signing key %s is given twice", k.ID())
		}
		seen[k.ID()] = true
	}
	return &Keyring{keys: keys}, nil
}

// Current is the key that signs.
func (r *Keyring) Current() SigningKey { return r.keys[0] }

// Seal returns the bundle.sig for a bundle of namespace and revision,
// signed by the current key, given the one the bundle carries now (prev;
// nil when none). prev itself when it is already the current key's for this
// revision: Ed25519 is deterministic and the counter is kept, so an
// unchanged bundle rewrites nothing. Otherwise the counter is the next above
// prev's, when a key of the ring verifies prev, and never below now in Unix
// milliseconds: a publisher that lost prev (a new leader, a deleted
// ConfigMap or file) still signs above every earlier counter, clocks
// permitting, so sidecars do not refuse its bundle as a rollback. The
// operator and `toolgate bundle --signing-key` both seal with it.
func (r *Keyring) Seal(namespace, revision string, prev []byte, now time.Time) []byte {
	key := r.Current()
	var last uint64
	if len(prev) > 0 {
		if s, err := r.Trusted().VerifyStatement(prev, namespace); err == nil {
			if s.KeyID == key.ID() && s.Revision == revision {
				return prev
			}
			last = s.Counter
		}
	}
	return key.Sign(namespace, revision, max(last+1, uint64(now.UnixMilli())))
}

// Keys are all keys, the current one first.
func (r *Keyring) Keys() []SigningKey { return append([]SigningKey(nil), r.keys...) }

// Trusted are the public halves of every key.
func (r *Keyring) Trusted() *TrustedKeys {
	t := &TrustedKeys{keys: map[string]ed25519.PublicKey{}}
	for _, k := range r.keys {
		t.add(k.Public())
	}
	return t
}

// PrivatePEM encodes the keys as PKCS #8 "PRIVATE KEY" blocks, in order.
func (r *Keyring) PrivatePEM() []byte {
	var out []byte
	for _, k := range r.keys {
		der, err := x509.MarshalPKCS8PrivateKey(k.priv)
		if err != nil {
			panic(err) // an ed25519.PrivateKey always marshals
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})...)
	}
	return out
}

// PublicPEM encodes the public halves as "PUBLIC KEY" blocks, in order:
// what sidecars are given with --trusted-keys.
func (r *Keyring) PublicPEM() []byte { return r.Trusted().PEM() }

// ParseKeyring reads what PrivatePEM wrote. Every block must be an Ed25519
// PKCS #8 private key.
func ParseKeyring(data []byte) (*Keyring, error) {
	var keys []SigningKey
	err := eachEd25519Key(data, "PRIVATE KEY", x509.ParsePKCS8PrivateKey, func(priv ed25519.PrivateKey) {
		keys = append(keys, SigningKey{priv: priv})
	})
	if err != nil {
		return nil, err
	}
	return NewKeyring(keys)
}

// eachEd25519Key hands use every key of data, which must be PEM blocks of
// blockType that parse decodes to a K (ed25519.PrivateKey or PublicKey).
// Any other block or key type is an error naming the block.
func eachEd25519Key[K any](data []byte, blockType string, parse func([]byte) (any, error), use func(K)) error {
	return eachPEMBlock(data, func(i int, b *pem.Block) error {
		if b.Type != blockType {
			return fmt.Errorf("block %d is %q, not %s (an Ed25519 key)", i+1, b.Type, blockType)
		}
		k, err := parse(b.Bytes)
		if err != nil {
			return fmt.Errorf("block %d: %w", i+1, err)
		}
		key, ok := k.(K)
		if !ok {
			return fmt.Errorf("block %d is a %T key, not Ed25519", i+1, k)
		}
		use(key)
		return nil
	})
}

// TrustedKeys are the public keys a sidecar accepts signatures from, by
// key id.
type TrustedKeys struct {
	keys  map[string]ed25519.PublicKey
	order []string
}

func (t *TrustedKeys) add(pub ed25519.PublicKey) {
	id := KeyID(pub)
	if _, ok := t.keys[id]; !ok {
		t.keys[id] = pub
		t.order = append(t.order, id)
	}
}

// IDs are the key ids, in the order given.
func (t *TrustedKeys) IDs() []string { return append([]string(nil), t.order...) }

// PEM encodes the keys as PKIX "PUBLIC KEY" blocks.
func (t *TrustedKeys) PEM() []byte {
	var out []byte
	for _, id := range t.order {
		der, err := x509.MarshalPKIXPublicKey(t.keys[id])
		if err != nil {
			panic(err) // an ed25519.PublicKey always marshals
		}
		out = append(out, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})...)
	}
	return out
}

// ParseTrustedKeys reads one or more PEM "PUBLIC KEY" blocks, each an
// Ed25519 key. Anything else (no block, text outside blocks, another key
// type, a private key) is an error naming the block: a sidecar must not
// start trusting fewer keys than its operator meant.
func ParseTrustedKeys(data []byte) (*TrustedKeys, error) {
	t := &TrustedKeys{keys: map[string]ed25519.PublicKey{}}
	if err := eachEd25519Key(data, "PUBLIC KEY", x509.ParsePKIXPublicKey, t.add); err != nil {
		return nil, err
	}
	return t, nil
}

// eachPEMBlock calls fn for every block and refuses data with none or with
// anything but whitespace around them.
func eachPEMBlock(data []byte, fn func(int, *pem.Block) error) error {
	rest := data
	n := 0
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if err := fn(n, b); err != nil {
			return err
		}
		n++
	}
	switch {
	case len(bytes.TrimSpace(rest)) > 0 && n == 0:
		return errors.New("not PEM: no -----BEGIN block found")
	case len(bytes.TrimSpace(rest)) > 0:
		return fmt.Errorf("%d bytes after block %d are not a PEM block", len(bytes.TrimSpace(rest)), n)
	case n == 0:
		return errors.New("empty: no PEM block")
	}
	return nil
}

// Verify checks a bundle.sig document: it parses, names a trusted key,
// was made for namespace and revision, and its signature verifies. It
// returns the verified signature (whose Counter the caller compares).
// Errors wrap ErrSignature. An empty namespace is never accepted.
func (t *TrustedKeys) Verify(sig []byte, namespace, revision string) (Signature, error) {
	s, err := t.VerifyStatement(sig, namespace)
	if err != nil {
		return Signature{}, err
	}
	if s.Revision != revision {
		return Signature{}, fmt.Errorf("%w: it signs revision %s, the document is %s", ErrBadSignature, s.Revision, revision)
	}
	return s, nil
}

// VerifyStatement is Verify without the document: what a publisher needs
// to trust the counter of the bundle it is about to replace.
func (t *TrustedKeys) VerifyStatement(sig []byte, namespace string) (Signature, error) {
	if len(sig) == 0 {
		return Signature{}, ErrUnsigned
	}
	s, err := parseSignature(sig)
	if err != nil {
		return Signature{}, err
	}
	pub, ok := t.keys[s.KeyID]
	if !ok {
		return Signature{}, fmt.Errorf("%w: key id %q (trusted: %v)", ErrUnknownKey, s.KeyID, t.order)
	}
	if !ed25519.Verify(pub, statement(s.Namespace, s.Revision, s.Counter), s.Sig) {
		return Signature{}, fmt.Errorf("%w with key %s", ErrBadSignature, s.KeyID)
	}
	if namespace == "" || s.Namespace != namespace {
		return Signature{}, fmt.Errorf("%w: signed for %q, read in %q", ErrWrongNamespace, s.Namespace, namespace)
	}
	return s, nil
}

func parseSignature(sig []byte) (Signature, error) {
	if len(sig) > maxSignatureBytes {
		return Signature{}, fmt.Errorf("%w: %d bytes, more than %d", ErrBadSignature, len(sig), maxSignatureBytes)
	}
	var s Signature
	dec := json.NewDecoder(bytes.NewReader(sig))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return Signature{}, fmt.Errorf("%w: %s is not a signature document: %v", ErrBadSignature, SignatureKey, err)
	}
	if len(s.Sig) != ed25519.SignatureSize {
		return Signature{}, fmt.Errorf("%w: the signature is %d bytes, not %d", ErrBadSignature, len(s.Sig), ed25519.SignatureSize)
	}
	return s, nil
}
