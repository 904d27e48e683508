package rego

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// edSigner is a Signer over a bare Ed25519 key (bundle.SigningKey is the
// operator's).
type edSigner struct{ priv ed25519.PrivateKey }

func (s edSigner) ID() string { return "test-key" }
func (s edSigner) SignJWS(in []byte) ([]byte, error) {
	return ed25519.Sign(s.priv, in), nil
}

func TestSignedTar(t *testing.T) {
	out, err := Export(samplesBundle(t))
	if err != nil {
		t.Fatal(err)
	}
	_, priv, _ := ed25519.GenerateKey(nil)
	s := edSigner{priv}
	doc, err := out.Tar(s)
	if err != nil {
		t.Fatal(err)
	}
	if again, _ := out.Tar(s); !bytes.Equal(doc, again) {
		t.Fatal("the signed tar is not reproducible: an unchanged bundle would be rewritten")
	}
	names, files := testenv.Untar(t, doc, "")
	if got := strings.Join(names, " "); got != "/.signatures.json /.manifest /toolgate/policy.rego /data.json" {
		t.Fatalf("signed tar holds %s", got)
	}
	var sigs signatures
	if err := json.Unmarshal([]byte(files["/"+SignaturesFile]), &sigs); err != nil || len(sigs.Signatures) != 1 {
		t.Fatalf(".signatures.json: %s (%v)", files["/"+SignaturesFile], err)
	}
	parts := strings.Split(sigs.Signatures[0], ".")
	header, _ := base64.RawURLEncoding.DecodeString(parts[0])
	if string(header) != `{"alg":"EdDSA","kid":"test-key"}` {
		t.Errorf("header %s", header)
	}
	sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
	if !ed25519.Verify(priv.Public().(ed25519.PublicKey), []byte(parts[0]+"."+parts[1]), sig) {
		t.Error("the JWS does not verify")
	}
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	var claims struct {
		Files []fileHash `json:"files"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil || len(claims.Files) != 3 {
		t.Fatalf("claims %s (%v)", payload, err)
	}
	for _, f := range claims.Files {
		want, _ := hashFile(f.Name, []byte(files["/"+f.Name]))
		if f.Algorithm != "SHA-256" || f.Hash != hex.EncodeToString(want) {
			t.Errorf("%+v", f)
		}
	}

	failing := failingSigner{}
	if _, err := out.Tar(failing); err == nil {
		t.Error("a signer's error was dropped")
	}
}

type failingSigner struct{}

func (failingSigner) ID() string                     { return "k" }
func (failingSigner) SignJWS([]byte) ([]byte, error) { return nil, errors.New("no") }

// OPA hashes data.json and .manifest as JSON: key order and whitespace do
// not count, numbers are hashed as written, strings without HTML escaping.
func TestHashFileIsOPAsCanonicalJSON(t *testing.T) {
	a, _ := hashFile(DataFile, []byte(`{"b": [1.50, "<x>"], "a": {"z": null, "y": true}}`))
	b, _ := hashFile(DataFile, []byte("{\"a\":{\"y\":true,\"z\":null},\n \"b\":[1.50,\"\\u003cx\\u003e\"]}"))
	if !bytes.Equal(a, b) {
		t.Error("equal JSON hashes differently")
	}
	var buf bytes.Buffer
	dec := json.NewDecoder(strings.NewReader(`{"b": [1.50, "<x>"], "a": {"z": null, "y": true}}`))
	dec.UseNumber()
	var v any
	_ = dec.Decode(&v)
	_ = canonical(&buf, v)
	if got := buf.String(); got != `{"a":{"y":true,"z":null},"b":[1.50,"<x>"]}` {
		t.Errorf("canonical form %s", got)
	}
	raw, _ := hashFile(PolicyFile, []byte("package toolgate\n"))
	spaced, _ := hashFile(PolicyFile, []byte("package  toolgate\n"))
	if bytes.Equal(raw, spaced) {
		t.Error("policy.rego is hashed as bytes")
	}
}
