package bundle

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Chunked bundles. One ConfigMap holds about 1 MiB; a gzipped bundle past
// that is split into parts stored in numbered ConfigMaps beside the bundle
// ConfigMap (PartName: NAME-1 ... NAME-N, each under PartKey), and the
// bundle ConfigMap holds an index of them (IndexKey) in place of the
// document, signed (IndexSignatureKey) like the document is. A reader
// verifies the index's signature, then fetches every part and checks its
// size and SHA-256 against the index, then reassembles the gzip stream and
// reads it as it would read GzipKey: the document's own signature
// (SignatureKey) is checked as for any bundle, rollback protection
// included. The publisher writes the parts first and the index last, so a
// reader never sees an index whose parts are missing; parts a smaller
// bundle no longer needs are deleted after the index moves on.
const (
	// IndexKey (in data) holds the index of a chunked bundle (Index).
	IndexKey = "bundle.index.json"
	// IndexSignatureKey (in data) holds the signature of the index: a
	// bundle.sig document whose revision is IndexClaim of the index.
	IndexSignatureKey = "bundle.index.sig"
	// PartKey (in binaryData of each part ConfigMap) holds one part of the
	// gzip stream.
	PartKey = "bundle.json.gz.part"
	// MaxParts bounds the parts of one bundle: the sidecar's Role names
	// each part ConfigMap (RBAC resourceNames cannot wildcard), and about
	// 16 MiB of gzip is already more than MaxDocumentBytes inflated.
	MaxParts = 16
	// IndexFormat is the index format written and the only one read.
	IndexFormat = 1

	// maxIndexBytes bounds an index before it is parsed: MaxParts entries
	// take under 3 KiB.
	maxIndexBytes = 8 << 10
)

// Errors reading a chunked bundle; RejectReason (bundlesource) names each.
var (
	// ErrBadIndex: the index does not parse or says something impossible.
	ErrBadIndex = errors.New("chunked bundle: bad index")
	// ErrMissingPart: a part the index names cannot be read.
	ErrMissingPart = errors.New("chunked bundle: missing part")
	// ErrPartMismatch: a part is not the size or digest the index says.
	ErrPartMismatch = errors.New("chunked bundle: part does not match the index")
)

// Index is the bundle.index.json document.
type Index struct {
	// Format is IndexFormat.
	Format int `json:"format"`
	// Revision is the revision of the document the parts reassemble to.
	Revision string `json:"revision"`
	// Size is the gzip stream's length: the sum of the parts' sizes.
	Size int `json:"size"`
	// Parts in order; the first is PartName(configMap, 1).
	Parts []IndexPart `json:"parts"`
}

// IndexPart is one part of the gzip stream.
type IndexPart struct {
	// Name is the part's ConfigMap, in the bundle ConfigMap's namespace.
	Name string `json:"name"`
	// SHA256 is the lowercase hex SHA-256 of the part's bytes.
	SHA256 string `json:"sha256"`
	// Size is the part's length in bytes.
	Size int `json:"size"`
}

// PartName is the ConfigMap holding part i (from 1) of configMap's bundle.
func PartName(configMap string, i int) string { return configMap + "-" + strconv.Itoa(i) }

// PartNames are every part ConfigMap configMap's bundle may use, in order:
// what the sidecar's Role names.
func PartNames(configMap string) []string {
	out := make([]string, MaxParts)
	for i := range out {
		out[i] = PartName(configMap, i+1)
	}
	return out
}

// Split cuts a gzip stream into parts of at most partSize bytes and makes
// their index. It refuses a stream needing more than MaxParts parts.
func Split(configMap, revision string, gz []byte, partSize int) (Index, [][]byte, error) {
	if partSize <= 0 || len(gz) == 0 {
		return Index{}, nil, fmt.Errorf("splitting a bundle: %d bytes into parts of %d", len(gz), partSize)
	}
	n := (len(gz) + partSize - 1) / partSize
	if n > MaxParts {
		return Index{}, nil, fmt.Errorf("the bundle needs %d parts of %d bytes, more than the %d allowed", n, partSize, MaxParts)
	}
	ix := Index{Format: IndexFormat, Revision: revision, Size: len(gz)}
	parts := make([][]byte, 0, n)
	for i := 0; i < n; i++ {
		part := gz[i*partSize : min(len(gz), (i+1)*partSize)]
		sum := sha256.Sum256(part)
		ix.Parts = append(ix.Parts, IndexPart{Name: PartName(configMap, i+1), SHA256: hex.EncodeToString(sum[:]), Size: len(part)})
		parts = append(parts, part)
	}
	return ix, parts, nil
}

// Marshal is the index document; equal indexes give equal bytes.
func (ix Index) Marshal() []byte {
	out, err := json.Marshal(ix)
	if err != nil {
		panic(err) // strings and numbers always encode
	}
	return out
}

// ParseIndex reads an index of configMap's bundle strictly: within its
// size bound, no unknown field, nothing after it, format IndexFormat, a
// revision, 1 to MaxParts parts named PartName(configMap, 1..N) in order,
// each with a SHA-256 and a size above zero, whose sizes add up to Size,
// which is at most MaxDocumentBytes (a gzip stream larger than the largest
// document a reader inflates is no bundle). Errors wrap ErrBadIndex.
func ParseIndex(doc []byte, configMap string) (Index, error) {
	bad := func(format string, args ...any) (Index, error) {
		return Index{}, fmt.Errorf("%w: %s", ErrBadIndex, fmt.Sprintf(format, args...))
	}
	if len(doc) > maxIndexBytes {
		return bad("%d bytes, more than %d", len(doc), maxIndexBytes)
	}
	var ix Index
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ix); err != nil {
		return bad("%s is not an index document: %v", IndexKey, err)
	}
	if rest := bytes.TrimSpace(doc[dec.InputOffset():]); len(rest) > 0 {
		return bad("%d bytes after the %s document", len(rest), IndexKey)
	}
	switch {
	case ix.Format != IndexFormat:
		return bad("format %d, this reader knows only %d", ix.Format, IndexFormat)
	case ix.Revision == "":
		return bad("no revision")
	case len(ix.Parts) == 0:
		return bad("no parts")
	case len(ix.Parts) > MaxParts:
		return bad("%d parts, more than the %d allowed", len(ix.Parts), MaxParts)
	case ix.Size <= 0 || ix.Size > MaxDocumentBytes:
		return bad("size %d, want 1 to %d bytes", ix.Size, MaxDocumentBytes)
	}
	total := 0
	for i, p := range ix.Parts {
		if want := PartName(configMap, i+1); p.Name != want {
			return bad("part %d is named %q, want %q", i+1, p.Name, want)
		}
		if d, err := hex.DecodeString(p.SHA256); err != nil || len(d) != sha256.Size || p.SHA256 != hex.EncodeToString(d) {
			return bad("part %d: sha256 %q is not 64 lowercase hex digits", i+1, p.SHA256)
		}
		if p.Size <= 0 || p.Size > ix.Size {
			return bad("part %d: size %d, want 1 to %d", i+1, p.Size, ix.Size)
		}
		total += p.Size
	}
	if total != ix.Size {
		return bad("the parts add up to %d bytes, the index says %d", total, ix.Size)
	}
	return ix, nil
}

// Assemble reads every part with get (by its ConfigMap name), checks it
// against the index and returns the gzip stream they make. A part get
// cannot find wraps ErrMissingPart; one of another size or digest wraps
// ErrPartMismatch. Nothing past a part's announced size is kept, so a
// part that lies about its size costs at most what get already read.
func Assemble(ix Index, get func(name string) ([]byte, error)) ([]byte, error) {
	out := make([]byte, 0, ix.Size)
	for i, p := range ix.Parts {
		part, err := get(p.Name)
		if err != nil {
			return nil, fmt.Errorf("%w: part %d (%s): %v", ErrMissingPart, i+1, p.Name, err)
		}
		if len(part) != p.Size {
			return nil, fmt.Errorf("%w: part %d (%s) is %d bytes, the index says %d", ErrPartMismatch, i+1, p.Name, len(part), p.Size)
		}
		if sum := sha256.Sum256(part); hex.EncodeToString(sum[:]) != p.SHA256 {
			return nil, fmt.Errorf("%w: part %d (%s) has sha256 %x, the index says %s", ErrPartMismatch, i+1, p.Name, sum, p.SHA256)
		}
		out = append(out, part...)
	}
	return out, nil
}

// IndexClaim is what an index's signature states in place of a revision:
// the index's own SHA-256. It can never equal a document's revision
// ("sha256:" and the document's digest, which engine.Decode recomputes),
// so an index signature is never accepted for a document, nor the other
// way round, though both are bundle.sig documents checked by the same
// code (endorsements included).
func IndexClaim(index []byte) string {
	sum := sha256.Sum256(index)
	return "index-sha256:" + hex.EncodeToString(sum[:])
}

// SealIndex is the signature of index for namespace, with the publish
// counter of docSig (the document's bundle.sig, sealed just before): the
// two travel together, and an unchanged bundle re-seals to the same bytes.
// A docSig that does not parse gives a counter from now.
func (r *Keyring) SealIndex(namespace string, index, docSig []byte, now time.Time) []byte {
	counter := uint64(now.UnixMilli())
	if s, err := parseSignature(docSig); err == nil {
		counter = s.Counter
	}
	return r.Current().Sign(namespace, IndexClaim(index), counter)
}

// VerifyIndex checks an index's signature (and, during a key rotation,
// the signing key's endorsements) for namespace. Errors wrap ErrSignature.
func (t *TrustedKeys) VerifyIndex(sig, endorsements, index []byte, namespace string) error {
	_, err := t.VerifyEndorsed(sig, endorsements, namespace, IndexClaim(index))
	return err
}

// IsChunked tells whether cm holds the index of a chunked bundle rather
// than the document.
func IsChunked(cm *corev1.ConfigMap) bool {
	_, ok := cm.Data[IndexKey]
	return ok
}

// ReadChunked returns the gzip stream of the chunked bundle cm indexes,
// and the index: it verifies the index's signature with trust (nil: the
// reader accepts unsigned bundles, and the index is not checked either),
// parses the index and assembles the parts read with get. The caller
// still reads the stream as a document (ReadDocument), checks that its
// revision is the index's, and verifies the document's own signature.
func ReadChunked(cm *corev1.ConfigMap, trust *TrustedKeys, namespace string, get func(name string) ([]byte, error)) ([]byte, Index, error) {
	where := "ConfigMap " + cm.Namespace + "/" + cm.Name
	_, hasPlain := cm.Data[Key]
	_, hasZipped := cm.BinaryData[GzipKey]
	if hasPlain || hasZipped {
		return nil, Index{}, fmt.Errorf("%w: %s has both %s and a document; refusing to guess which is current", ErrBadIndex, where, IndexKey)
	}
	raw := []byte(cm.Data[IndexKey])
	if trust != nil {
		var endorsements []byte
		if e, ok := cm.Data[EndorsementsKey]; ok {
			endorsements = []byte(e)
		}
		if err := trust.VerifyIndex([]byte(cm.Data[IndexSignatureKey]), endorsements, raw, namespace); err != nil {
			return nil, Index{}, fmt.Errorf("%s: %s (%s): %w", where, IndexKey, IndexSignatureKey, err)
		}
	}
	ix, err := ParseIndex(raw, cm.Name)
	if err != nil {
		return nil, Index{}, fmt.Errorf("%s: %w", where, err)
	}
	gz, err := Assemble(ix, get)
	if err != nil {
		return nil, Index{}, fmt.Errorf("%s: %w", where, err)
	}
	return gz, ix, nil
}
