package rego

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"sort"
)

// SignaturesFile is the OPA bundle signature file, at the bundle's root.
const SignaturesFile = ".signatures.json"

// Signer signs a bundle the way OPA verifies one: .signatures.json holds a
// compact JWS, header {"alg":"EdDSA","kid":ID()}, whose payload lists every
// file of the bundle with its SHA-256 (OPA's "files" claim). OPA configured
// with keys: {ID(): {algorithm: EdDSA, key: <PEM public key>}} accepts the
// bundle only if the signature verifies and every file matches its hash.
// bundle.SigningKey is one.
type Signer interface {
	// ID is the key id: the JWS kid, the name of the key in OPA's keys.
	ID() string
	// SignJWS returns the Ed25519 signature of a JWS signing input
	// (base64url(header) "." base64url(payload)).
	SignJWS(signingInput []byte) ([]byte, error)
}

// fileHash is one entry of the JWS "files" claim.
type fileHash struct {
	Name      string `json:"name"`
	Hash      string `json:"hash"`
	Algorithm string `json:"algorithm"`
}

// signatures is the .signatures.json document.
type signatures struct {
	Signatures []string `json:"signatures"`
}

// signaturesFile returns the .signatures.json for files (path and contents,
// paths relative to the root). It is deterministic: no issued-at claim, and
// Ed25519 signatures are deterministic, so an unchanged bundle signed with
// the same key gives the same bytes.
func signaturesFile(files [][2]string, s Signer) ([]byte, error) {
	claims := struct {
		Files []fileHash `json:"files"`
	}{Files: make([]fileHash, 0, len(files))}
	for _, f := range files {
		sum, err := hashFile(f[0], []byte(f[1]))
		if err != nil {
			return nil, fmt.Errorf("hashing %s: %w", f[0], err)
		}
		claims.Files = append(claims.Files, fileHash{Name: f[0], Hash: hex.EncodeToString(sum), Algorithm: "SHA-256"})
	}
	header, err := json.Marshal(struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
	}{"EdDSA", s.ID()})
	if err != nil {
		return nil, err
	}
	payload, err := json.Marshal(claims)
	if err != nil {
		return nil, err
	}
	enc := base64.RawURLEncoding
	input := enc.EncodeToString(header) + "." + enc.EncodeToString(payload)
	sig, err := s.SignJWS([]byte(input))
	if err != nil {
		return nil, fmt.Errorf("signing the bundle: %w", err)
	}
	doc, err := json.Marshal(signatures{Signatures: []string{input + "." + enc.EncodeToString(sig)}})
	if err != nil {
		return nil, err
	}
	return append(doc, '\n'), nil
}

// hashFile is OPA's bundle file digest (bundle.VerifyBundleFile): the
// SHA-256 of the bytes, except for structured files (data.json and
// .manifest here), whose JSON is hashed in a canonical form independent of
// whitespace and key order: objects with keys sorted, numbers as written.
func hashFile(name string, content []byte) ([]byte, error) {
	h := sha256.New()
	if base := path.Base(name); base != DataFile && base != ManifestFile {
		h.Write(content)
		return h.Sum(nil), nil
	}
	dec := json.NewDecoder(bytes.NewReader(content))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := canonical(&buf, v); err != nil {
		return nil, err
	}
	h.Write(buf.Bytes())
	return h.Sum(nil), nil
}

// canonical writes v as OPA's hasher walks it: "{", each key (sorted,
// JSON-encoded without HTML escaping) ":" value, "," between, "}"; arrays
// likewise; primitives JSON-encoded without HTML escaping.
func canonical(buf *bytes.Buffer, v any) error {
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := primitive(buf, k); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := canonical(buf, x[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := canonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	default:
		return primitive(buf, x)
	}
	return nil
}

func primitive(buf *bytes.Buffer, v any) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return err
	}
	buf.Write(bytes.Trim(b.Bytes(), "\n"))
	return nil
}
