package regodiff

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	opabundle "github.com/open-policy-agent/opa/v1/bundle"
	"github.com/open-policy-agent/opa/v1/keys"

	"github.com/toolgate/toolgate/bundle"
	torego "github.com/toolgate/toolgate/rego"
)

// signedSamples is the samples' Rego bundle as the operator publishes it
// with --publish-rego, signed by key.
func signedSamples(t *testing.T, key bundle.SigningKey) []byte {
	t.Helper()
	b := samplesBundle(t, time.Date(2026, 11, 16, 9, 30, 0, 0, time.UTC))
	out, err := torego.Export(b)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := out.Tar(key)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// opaKeys trusts key as `opa run --bundle ... --verification-key PEM
// --verification-key-id KID --signing-alg EdDSA` does (keys.NewKeyConfig):
// the key's id, EdDSA, and its PEM block as keys.pem publishes it.
func opaKeys(t *testing.T, key bundle.SigningKey) map[string]*keys.Config {
	t.Helper()
	ring, err := bundle.NewKeyring([]bundle.SigningKey{key})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := keys.NewKeyConfig(string(ring.PublicPEM()), "EdDSA", "")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]*keys.Config{key.ID(): cfg}
}

// OPA v1.22's configuration file (`keys:`, which the bundle plugin's
// `signing` refers to) accepts RS*, PS*, ES* and HS* only, and the bundle
// plugin without keys refuses any signed bundle: an EdDSA-signed Rego
// bundle is verified with the command-line flags (or the Go API), as
// docs/opa.md says. This pins both, so that docs/opa.md is revisited when
// OPA changes.
func TestOPAConfigurationLimitsForEdDSABundles(t *testing.T) {
	key := newKey(t)
	raw, _ := json.Marshal(map[string]any{key.ID(): map[string]string{"algorithm": "EdDSA", "key": "-"}})
	if _, err := keys.ParseKeysConfig(raw); err == nil || !strings.Contains(err.Error(), "unsupported algorithm") {
		t.Errorf("OPA's keys configuration now takes EdDSA (%v): update docs/opa.md, \"Published by the operator\"", err)
	}
	if _, err := opabundle.NewReader(bytes.NewReader(signedSamples(t, key))).Read(); err == nil {
		t.Error("OPA without verification keys now loads a signed bundle: update docs/opa.md")
	}
	if _, err := opabundle.NewReader(bytes.NewReader(signedSamples(t, key))).WithSkipBundleVerification(true).Read(); err != nil {
		t.Errorf("--skip-verify: %v", err)
	}
}

// readSigned loads raw with OPA's bundle reader, verifying it against
// trusted; keyID is bundles.<name>.signing.keyid ("": the JWS kid).
func readSigned(raw []byte, trusted map[string]*keys.Config, keyID string) (opabundle.Bundle, error) {
	vc := opabundle.NewVerificationConfig(trusted, keyID, "", nil)
	return opabundle.NewReader(bytes.NewReader(raw)).WithBundleVerificationConfig(vc).Read()
}

func TestOPAVerifiesTheSignedRegoBundle(t *testing.T) {
	key, other := newKey(t), newKey(t)
	raw := signedSamples(t, key)
	trusted := opaKeys(t, key)

	for _, keyID := range []string{key.ID(), ""} {
		b, err := readSigned(raw, trusted, keyID)
		if err != nil {
			t.Fatalf("keyid %q: OPA refuses the bundle signed by the trusted key: %v", keyID, err)
		}
		if len(b.Modules) != 1 || b.Modules[0].Path != "/"+torego.PolicyFile || b.Data[torego.Root] == nil {
			t.Fatalf("keyid %q: OPA read %d modules and data %v", keyID, len(b.Modules), b.Data)
		}
	}
	// Unsigned, the same bundle does not pass a configuration that wants
	// a signature.
	out, _ := torego.Export(samplesBundle(t, time.Date(2026, 11, 16, 9, 30, 0, 0, time.UTC)))
	unsigned, _ := out.Tar(nil)
	if _, err := readSigned(unsigned, trusted, key.ID()); err == nil {
		t.Error("OPA accepted an unsigned bundle where a signature is configured")
	}

	// Tampered policy.rego: the file hash no longer matches.
	tampered := retar(t, raw, func(name string, content []byte) []byte {
		if name == torego.PolicyFile {
			return bytes.Replace(content, []byte("package toolgate\n"), []byte("package toolgate\n\nallow_everything := true\n"), 1)
		}
		return content
	})
	if _, err := readSigned(tampered, trusted, key.ID()); err == nil || !strings.Contains(err.Error(), "digest mismatch") {
		t.Errorf("tampered policy.rego: want a digest mismatch, got %v", err)
	}
	// Tampered data.json, reformatted only: the structured hash ignores
	// whitespace, so only a change of content is refused.
	reformatted := retar(t, raw, func(name string, content []byte) []byte {
		if name == torego.DataFile {
			var v any
			_ = json.Unmarshal(content, &v)
			content, _ = json.Marshal(v)
		}
		return content
	})
	if _, err := readSigned(reformatted, trusted, key.ID()); err != nil {
		t.Errorf("data.json reformatted: %v", err)
	}
	changed := retar(t, raw, func(name string, content []byte) []byte {
		if name == torego.DataFile {
			return bytes.Replace(content, []byte(`"deny"`), []byte(`"allow"`), 1)
		}
		return content
	})
	if _, err := readSigned(changed, trusted, key.ID()); err == nil || !strings.Contains(err.Error(), "digest mismatch") {
		t.Errorf("data.json changed: want a digest mismatch, got %v", err)
	}

	// Signed by another key: refused whether OPA picks the key by the
	// configured keyid or by the JWS kid.
	forged := signedSamples(t, other)
	if _, err := readSigned(forged, trusted, key.ID()); err == nil || !strings.Contains(err.Error(), "failed to verify JWT signature") {
		t.Errorf("signed by another key, keyid configured: want the signature refused, got %v", err)
	}
	if _, err := readSigned(forged, trusted, ""); err == nil || !strings.Contains(err.Error(), other.ID()) {
		t.Errorf("signed by another key, keyid from the kid: want its key unknown, got %v", err)
	}
}

func newKey(t *testing.T) bundle.SigningKey {
	t.Helper()
	k, err := bundle.GenerateSigningKey()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// retar rewrites a gzipped tar's files through edit, keeping their order.
func retar(t *testing.T, raw []byte, edit func(name string, content []byte) []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		content, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		content = edit(strings.TrimPrefix(hdr.Name, "/"), content)
		hdr.Size = int64(len(content))
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(content); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
