package bundle_test

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/internal/testenv"
)

func randomBytes(t *testing.T, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// parts serves the parts of a split stream by name, as the API would.
func partsByName(ix bundle.Index, parts [][]byte) func(string) ([]byte, error) {
	byName := map[string][]byte{}
	for i, p := range ix.Parts {
		byName[p.Name] = parts[i]
	}
	return func(name string) ([]byte, error) {
		p, ok := byName[name]
		if !ok {
			return nil, fmt.Errorf("configmaps %q not found", name)
		}
		return p, nil
	}
}

func TestSplitAndAssemble(t *testing.T) {
	gz := randomBytes(t, 2500)
	ix, parts, err := bundle.Split("toolgate-bundle", "sha256:aa", gz, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if len(parts) != 3 || len(parts[2]) != 500 || ix.Size != 2500 || ix.Parts[0].Name != "toolgate-bundle-1" || ix.Parts[2].Name != "toolgate-bundle-3" {
		t.Fatalf("2,500 bytes in parts of 1,000: index %+v, %d parts", ix, len(parts))
	}
	parsed, err := bundle.ParseIndex(ix.Marshal(), "toolgate-bundle")
	if err != nil {
		t.Fatalf("the index written does not parse: %v", err)
	}
	got, err := bundle.Assemble(parsed, partsByName(ix, parts))
	if err != nil || !bytes.Equal(got, gz) {
		t.Fatalf("Assemble: %d bytes, %v; want the 2,500 split", len(got), err)
	}
	again, _, _ := bundle.Split("toolgate-bundle", "sha256:aa", gz, 1000)
	if !bytes.Equal(again.Marshal(), ix.Marshal()) {
		t.Fatal("splitting the same stream twice gave different indexes: every reconcile would rewrite the bundle")
	}

	// Exactly one part, exactly MaxParts, one too many.
	if ix, parts, err := bundle.Split("b", "r", gz, 2500); err != nil || len(parts) != 1 || len(ix.Parts) != 1 {
		t.Fatalf("one part: %+v, %v", ix, err)
	}
	if _, parts, err := bundle.Split("b", "r", randomBytes(t, bundle.MaxParts*10), 10); err != nil || len(parts) != bundle.MaxParts {
		t.Fatalf("MaxParts parts: %d, %v", len(parts), err)
	}
	_, _, err = bundle.Split("b", "r", randomBytes(t, bundle.MaxParts*10+1), 10)
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("needs %d parts", bundle.MaxParts+1)) {
		t.Fatalf("one byte past MaxParts parts: %v", err)
	}
	if _, _, err := bundle.Split("b", "r", nil, 10); err == nil {
		t.Fatal("splitting nothing succeeded")
	}
	if _, _, err := bundle.Split("b", "r", gz, 0); err == nil {
		t.Fatal("parts of 0 bytes succeeded")
	}
}

func TestPartNames(t *testing.T) {
	names := bundle.PartNames("toolgate-bundle")
	if len(names) != bundle.MaxParts || names[0] != "toolgate-bundle-1" || names[bundle.MaxParts-1] != "toolgate-bundle-16" {
		t.Fatalf("PartNames = %v", names)
	}
}

// Every malformed index is refused with ErrBadIndex and says what is wrong.
func TestParseIndexRefusesMalformed(t *testing.T) {
	ix, _, err := bundle.Split("toolgate-bundle", "sha256:aa", randomBytes(t, 2500), 1000)
	if err != nil {
		t.Fatal(err)
	}
	edit := func(f func(*bundle.Index)) []byte {
		c := ix
		c.Parts = append([]bundle.IndexPart(nil), ix.Parts...)
		f(&c)
		return c.Marshal()
	}
	tooMany := bundle.Index{Format: 1, Revision: "r", Size: bundle.MaxParts + 1}
	for i := range bundle.MaxParts + 1 {
		tooMany.Parts = append(tooMany.Parts, bundle.IndexPart{Name: bundle.PartName("toolgate-bundle", i+1), SHA256: ix.Parts[0].SHA256, Size: 1})
	}
	for _, c := range []struct {
		name, want string
		doc        []byte
	}{
		{"not JSON", "is not an index document", []byte("parts: 3")},
		{"empty", "is not an index document", nil},
		{"unknown field", "unknown field", []byte(strings.Replace(string(ix.Marshal()), `"format"`, `"signed":true,"format"`, 1))},
		{"trailing bytes", "after the", append(ix.Marshal(), []byte(`{}`)...)},
		{"too large", "more than", []byte(`{"format":1,"revision":"` + strings.Repeat("a", 9000) + `"}`)},
		{"other format", "format 2", edit(func(c *bundle.Index) { c.Format = 2 })},
		{"no revision", "no revision", edit(func(c *bundle.Index) { c.Revision = "" })},
		{"no parts", "no parts", edit(func(c *bundle.Index) { c.Parts = nil })},
		{"too many parts", "17 parts", tooMany.Marshal()},
		{"size zero", "size 0", edit(func(c *bundle.Index) { c.Size = 0 })},
		{"size past the document limit", "want 1 to", edit(func(c *bundle.Index) { c.Size = bundle.MaxDocumentBytes + 1 })},
		{"sizes do not add up", "add up to 2500", edit(func(c *bundle.Index) { c.Size = 2400 })},
		{"part of size zero", "part 2: size 0", edit(func(c *bundle.Index) { c.Parts[1].Size = 0 })},
		{"negative part", "part 2: size -1", edit(func(c *bundle.Index) { c.Parts[1].Size = -1 })},
		{"parts out of order", `part 1 is named "toolgate-bundle-2"`, edit(func(c *bundle.Index) { c.Parts[0], c.Parts[1] = c.Parts[1], c.Parts[0] })},
		{"a part elsewhere", `part 3 is named "app-settings"`, edit(func(c *bundle.Index) { c.Parts[2].Name = "app-settings" })},
		{"short digest", "not 64 lowercase hex", edit(func(c *bundle.Index) { c.Parts[0].SHA256 = "abcd" })},
		{"uppercase digest", "not 64 lowercase hex", edit(func(c *bundle.Index) { c.Parts[0].SHA256 = strings.ToUpper(c.Parts[0].SHA256) })},
		{"not hex", "not 64 lowercase hex", edit(func(c *bundle.Index) { c.Parts[0].SHA256 = strings.Repeat("z", 64) })},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := bundle.ParseIndex(c.doc, "toolgate-bundle")
			if !errors.Is(err, bundle.ErrBadIndex) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ParseIndex = %v; want ErrBadIndex saying %q", err, c.want)
			}
		})
	}
	// The same index read for another bundle ConfigMap names other parts.
	if _, err := bundle.ParseIndex(ix.Marshal(), "other"); !errors.Is(err, bundle.ErrBadIndex) {
		t.Fatalf("an index read as another ConfigMap's: %v", err)
	}
}

// A part missing, of another size, or with other bytes is refused; a part
// that lies about its size is not kept past it.
func TestAssembleRefusesWhatTheIndexDoesNotSay(t *testing.T) {
	gz := randomBytes(t, 2500)
	ix, parts, err := bundle.Split("b", "r", gz, 1000)
	if err != nil {
		t.Fatal(err)
	}
	serve := func(f func(name string, p []byte) ([]byte, error)) func(string) ([]byte, error) {
		get := partsByName(ix, parts)
		return func(name string) ([]byte, error) {
			p, err := get(name)
			if err != nil {
				return nil, err
			}
			return f(name, bytes.Clone(p))
		}
	}
	for _, c := range []struct {
		name  string
		get   func(string) ([]byte, error)
		want  error
		words string
	}{
		{"missing", serve(func(n string, p []byte) ([]byte, error) {
			if n == "b-2" {
				return nil, errors.New(`configmaps "b-2" not found`)
			}
			return p, nil
		}), bundle.ErrMissingPart, "part 2 (b-2)"},
		{"shorter", serve(func(n string, p []byte) ([]byte, error) {
			if n == "b-3" {
				return p[:10], nil
			}
			return p, nil
		}), bundle.ErrPartMismatch, "is 10 bytes, the index says 500"},
		{"longer", serve(func(n string, p []byte) ([]byte, error) {
			if n == "b-1" {
				return append(p, 0), nil
			}
			return p, nil
		}), bundle.ErrPartMismatch, "is 1001 bytes"},
		{"other bytes", serve(func(n string, p []byte) ([]byte, error) {
			if n == "b-2" {
				p[0] ^= 0xff
			}
			return p, nil
		}), bundle.ErrPartMismatch, "has sha256"},
		{"swapped", serve(func(n string, p []byte) ([]byte, error) {
			if n == "b-1" {
				return parts[1], nil
			}
			return p, nil
		}), bundle.ErrPartMismatch, "part 1 (b-1) has sha256"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := bundle.Assemble(ix, c.get)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.words) || got != nil {
				t.Fatalf("Assemble = %d bytes, %v; want %v saying %q", len(got), err, c.want, c.words)
			}
		})
	}
}

// The index's signature is a bundle.sig document whose claim can never be
// a document's revision: neither signature passes for the other.
func TestIndexSignature(t *testing.T) {
	ring := testenv.Keyring(t, 1)
	trusted := ring.Trusted()
	index := []byte(`{"format":1}`)
	docSig := ring.Seal("agents", "sha256:aa", nil, time.Now())
	sig := ring.SealIndex("agents", index, docSig, time.Now())
	if err := trusted.VerifyIndex(sig, nil, index, "agents"); err != nil {
		t.Fatalf("the index signature does not verify: %v", err)
	}
	if again := ring.SealIndex("agents", index, docSig, time.Now().Add(time.Hour)); !bytes.Equal(again, sig) {
		t.Fatal("sealing the same index with the same document signature gave other bytes: every reconcile would rewrite the bundle")
	}
	var s, d bundle.Signature
	if json.Unmarshal(sig, &s) != nil || json.Unmarshal(docSig, &d) != nil || s.Counter != d.Counter {
		t.Fatalf("the index is sealed with counter %d, the document with %d", s.Counter, d.Counter)
	}
	for _, c := range []struct {
		name string
		err  error
		want error
	}{
		{"another index", trusted.VerifyIndex(sig, nil, []byte(`{"format":2}`), "agents"), bundle.ErrBadSignature},
		{"another namespace", trusted.VerifyIndex(sig, nil, index, "prod"), bundle.ErrWrongNamespace},
		{"unsigned", trusted.VerifyIndex(nil, nil, index, "agents"), bundle.ErrUnsigned},
		{"the document's signature for the index", trusted.VerifyIndex(docSig, nil, index, "agents"), bundle.ErrBadSignature},
		{"an untrusted key", testenv.Keyring(t, 1).Trusted().VerifyIndex(sig, nil, index, "agents"), bundle.ErrUnknownKey},
	} {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	if _, err := trusted.Verify(sig, "agents", bundle.IndexClaim(index)); err != nil {
		t.Fatalf("the claim is the index's digest: %v", err)
	}
	if _, err := trusted.Verify(sig, "agents", "sha256:aa"); !errors.Is(err, bundle.ErrBadSignature) {
		t.Fatalf("the index signature passed for a document: %v", err)
	}
}

// ReadChunked verifies the index before it reads a part, and refuses a
// ConfigMap holding both an index and a document.
func TestReadChunked(t *testing.T) {
	ring := testenv.Keyring(t, 1)
	gz := randomBytes(t, 2500)
	ix, parts, err := bundle.Split("toolgate-bundle", "sha256:aa", gz, 1000)
	if err != nil {
		t.Fatal(err)
	}
	index := ix.Marshal()
	docSig := ring.Seal("agents", "sha256:aa", nil, time.Now())
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "agents", Name: "toolgate-bundle"},
		Data: map[string]string{bundle.IndexKey: string(index), bundle.SignatureKey: string(docSig),
			bundle.IndexSignatureKey: string(ring.SealIndex("agents", index, docSig, time.Now()))}}
	if !bundle.IsChunked(cm) {
		t.Fatal("IsChunked = false for an index")
	}
	got, gotIx, err := bundle.ReadChunked(cm, ring.Trusted(), "agents", partsByName(ix, parts))
	if err != nil || !bytes.Equal(got, gz) || gotIx.Revision != "sha256:aa" {
		t.Fatalf("ReadChunked = %d bytes, %+v, %v", len(got), gotIx, err)
	}

	reads := 0
	counting := func(string) ([]byte, error) { reads++; return nil, errors.New("unexpected read") }
	forged := cm.DeepCopy()
	forged.Data[bundle.IndexKey] = strings.Replace(string(index), ix.Parts[0].SHA256, strings.Repeat("0", 64), 1)
	if _, _, err := bundle.ReadChunked(forged, ring.Trusted(), "agents", counting); !errors.Is(err, bundle.ErrBadSignature) || reads != 0 {
		t.Fatalf("a forged index: %v after %d part reads; want ErrBadSignature before any", err, reads)
	}
	unsigned := cm.DeepCopy()
	delete(unsigned.Data, bundle.IndexSignatureKey)
	if _, _, err := bundle.ReadChunked(unsigned, ring.Trusted(), "agents", counting); !errors.Is(err, bundle.ErrUnsigned) || reads != 0 {
		t.Fatalf("an unsigned index read with trusted keys: %v", err)
	}
	// Without trusted keys the index is not checked, the parts still are.
	if _, _, err := bundle.ReadChunked(forged, nil, "agents", partsByName(ix, parts)); !errors.Is(err, bundle.ErrPartMismatch) {
		t.Fatalf("a forged index without trusted keys: %v, want ErrPartMismatch", err)
	}
	both := cm.DeepCopy()
	both.Data[bundle.Key] = "{}"
	if _, _, err := bundle.ReadChunked(both, ring.Trusted(), "agents", counting); !errors.Is(err, bundle.ErrBadIndex) || !strings.Contains(err.Error(), "refusing to guess") {
		t.Fatalf("index and document: %v", err)
	}
	if _, _, err := bundle.FromConfigMap(both); !errors.Is(err, bundle.ErrBadIndex) {
		t.Fatalf("FromConfigMap of an index and a document: %v", err)
	}
}
