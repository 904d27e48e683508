package bundle_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/internal/testenv"
)

func TestSignatureVerifies(t *testing.T) {
	r := testenv.Keyring(t, 2)
	trusted, err := bundle.ParseTrustedKeys(r.PublicPEM())
	if err != nil {
		t.Fatal(err)
	}
	sig := r.Current().Sign("agents", "sha256:aa", 7)
	if again := r.Current().Sign("agents", "sha256:aa", 7); string(again) != string(sig) {
		t.Fatal("signing the same statement twice gave different bytes: a publisher would rewrite on every reconcile")
	}
	s, err := trusted.Verify(sig, "agents", "sha256:aa")
	if err != nil || s.Counter != 7 || s.KeyID != r.Current().ID() {
		t.Fatalf("Verify = %+v, %v", s, err)
	}
	for _, c := range []struct {
		name    string
		sig     []byte
		ns, rev string
		want    error
	}{
		{"unsigned", nil, "agents", "sha256:aa", bundle.ErrUnsigned},
		{"other revision", sig, "agents", "sha256:bb", bundle.ErrBadSignature},
		{"other namespace", sig, "prod", "sha256:aa", bundle.ErrWrongNamespace},
		{"no namespace", sig, "", "sha256:aa", bundle.ErrWrongNamespace},
		{"unknown key", testenv.Keyring(t, 1).Current().Sign("agents", "sha256:aa", 7), "agents", "sha256:aa", bundle.ErrUnknownKey},
		{"counter edited", edit(t, sig, func(s *bundle.Signature) { s.Counter = 1 << 62 }), "agents", "sha256:aa", bundle.ErrBadSignature},
		{"not JSON", []byte("hello"), "agents", "sha256:aa", bundle.ErrBadSignature},
		{"short signature", edit(t, sig, func(s *bundle.Signature) { s.Sig = s.Sig[:10] }), "agents", "sha256:aa", bundle.ErrBadSignature},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := trusted.Verify(c.sig, c.ns, c.rev)
			if !errors.Is(err, c.want) || !errors.Is(err, bundle.ErrSignature) {
				t.Fatalf("Verify: %v, want %v", err, c.want)
			}
		})
	}
}

func edit(t *testing.T, sig []byte, f func(*bundle.Signature)) []byte {
	t.Helper()
	var s bundle.Signature
	if err := json.Unmarshal(sig, &s); err != nil {
		t.Fatal(err)
	}
	f(&s)
	out, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestKeyringRoundTrips(t *testing.T) {
	r := testenv.Keyring(t, 3)
	back, err := bundle.ParseKeyring(r.PrivatePEM())
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range back.Keys() {
		if k.ID() != r.Keys()[i].ID() {
			t.Fatalf("key %d: %s, want %s", i, k.ID(), r.Keys()[i].ID())
		}
	}
	if _, err := bundle.ParseKeyring(r.PublicPEM()); err == nil {
		t.Fatal("ParseKeyring accepted public keys")
	}
}

func TestMalformedTrustedKeysAreRefused(t *testing.T) {
	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&ec.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	ecPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	good := string(testenv.Keyring(t, 1).PublicPEM())
	for _, c := range []struct{ name, data, want string }{
		{"empty", "", "empty"},
		{"blank", " \n\t", "empty"},
		{"not PEM", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI", "not PEM"},
		{"wrong key type", ecPEM, "not Ed25519"},
		{"a good key then a wrong one", good + ecPEM, "block 2"},
		{"private key", string(testenv.Keyring(t, 1).PrivatePEM()), "not PUBLIC KEY"},
		{"junk after a key", good + "junk", "not a PEM block"},
		{"corrupt DER", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", "block 1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := bundle.ParseTrustedKeys([]byte(c.data))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ParseTrustedKeys: %v, want an error containing %q", err, c.want)
			}
		})
	}
}

// BenchmarkVerify is the cost a sidecar pays once per bundle load (never
// per decision).
func BenchmarkVerify(b *testing.B) {
	r := testenv.Keyring(b, 2)
	trusted := r.Trusted()
	sig := r.Current().Sign("agents", "sha256:aa", 7)
	for b.Loop() {
		if _, err := trusted.Verify(sig, "agents", "sha256:aa"); err != nil {
			b.Fatal(err)
		}
	}
}

// SignJWS signs JWS signing inputs (the Rego bundle's .signatures.json) and
// nothing else: never a bundle.sig statement.
func TestSignJWSSignsOnlyJWSInput(t *testing.T) {
	k := testenv.Keyring(t, 1).Current()
	sig, err := k.SignJWS([]byte("eyJhbGciOiJFZERTQSJ9.eyJmaWxlcyI6W119"))
	if err != nil || len(sig) != 64 {
		t.Fatalf("a JWS signing input: %d bytes, %v", len(sig), err)
	}
	for _, in := range []string{
		"toolgate-bundle-signature-v1\nnamespace=agents\nrevision=sha256:aa\ncounter=7\n",
		"eyJhbGciOiJFZERTQSJ9", "a.b.c", "a.b=", "",
	} {
		if _, err := k.SignJWS([]byte(in)); err == nil {
			t.Errorf("SignJWS signed %q", in)
		}
	}
}
