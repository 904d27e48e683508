package bundle

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"

	"github.com/toolgate/toolgate/engine"
)

// The bundle ConfigMap: the operator writes it, sidecars read it (through
// the API or as a mounted volume). Both sides use these definitions.
const (
	DefaultConfigMapName = "toolgate-bundle"

	// Key (in data) holds the bundle document when it is small enough.
	Key = "bundle.json"
	// GzipKey (in binaryData) holds it gzip-compressed when it is not.
	GzipKey = "bundle.json.gz"
	// RegoTarKey (in binaryData), when the operator runs with
	// --publish-rego, holds the namespace's bundle as an OPA bundle
	// (`toolgate export rego --tar`), signed for OPA when the operator
	// signs. Sidecars ignore it.
	RegoTarKey = "bundle.rego.tar.gz"
	// SignatureKey (in data) holds the operator's signature over the
	// document (see Signature); a mounted volume shows it as a file.
	SignatureKey = "bundle.sig"
	// EndorsementsKey (in data), while the operator's keyring holds more
	// than one key, holds the signing key's public key endorsed by every
	// other key (see KeyEndorsements): a sidecar admitted before the key
	// was added accepts bundles it signs. A new key, not a field of
	// bundle.sig, so sidecars that parse bundle.sig strictly and know
	// nothing of endorsements read the ConfigMap (and its volume) as before.
	EndorsementsKey = "bundle.endorsements"

	// SigningKeysConfigMapName is the ConfigMap, in the operator's own
	// namespace, that publishes the operator's public keys under
	// SigningKeysKey (PEM, one or more Ed25519 public keys).
	SigningKeysConfigMapName = "toolgate-signing-keys"
	SigningKeysKey           = "keys.pem"
	// SigningKeySecretName is the Secret, in the operator's namespace,
	// holding its private signing keys under SigningKeySecretKey.
	SigningKeySecretName = "toolgate-signing-key"
	SigningKeySecretKey  = "keys.pem"

	// MaxDocumentBytes bounds a decompressed document. The operator publishes
	// nothing larger (BundleTooLarge) and readers refuse anything larger, so a
	// gzip bomb of a few hundred KiB cannot exhaust a sidecar: reading stays
	// within about twice this, well under the injected sidecar's 64 MiB
	// memory limit (TestAttackGzipBombIsRefused measures it).
	MaxDocumentBytes = 8 << 20
)

// FromConfigMap returns what a bundle ConfigMap carries: the bytes under Key,
// or under GzipKey (gzipped=true), as PickKey decides.
func FromConfigMap(cm *corev1.ConfigMap) (raw []byte, gzipped bool, err error) {
	plain, hasPlain := cm.Data[Key]
	zipped, hasZipped := cm.BinaryData[GzipKey]
	where := "ConfigMap " + cm.Namespace + "/" + cm.Name
	raw, gzipped, found, err := PickKey(where, []byte(plain), hasPlain, zipped, hasZipped)
	if err == nil && !found {
		err = fmt.Errorf("%s has neither data.%s nor binaryData.%s", where, Key, GzipKey)
	}
	if err == nil && IsChunked(cm) {
		err = fmt.Errorf("%w: %s has both %s and a document; refusing to guess which is current", ErrBadIndex, where, IndexKey)
	}
	return raw, gzipped, err
}

// PickKey is the one rule for reading a bundle from its two keys, in a
// ConfigMap or in the files of its mounted volume: one key is the bundle,
// both is an error (a reader must not guess which is current), neither is
// found=false.
func PickKey(where string, plain []byte, hasPlain bool, zipped []byte, hasZipped bool) (raw []byte, gzipped, found bool, err error) {
	switch {
	case hasPlain && hasZipped:
		return nil, false, false, fmt.Errorf("%s has both %s and %s; refusing to guess which is current", where, Key, GzipKey)
	case hasPlain:
		return plain, false, true, nil
	case hasZipped:
		return zipped, true, true, nil
	}
	return nil, false, false, nil
}

// ReadDocument returns the bundle document in raw, decompressing it when
// gzipped, within MaxDocumentBytes. Errors wrap engine.ErrCorruptBundle.
func ReadDocument(raw []byte, gzipped bool) ([]byte, error) {
	if !gzipped {
		if len(raw) > MaxDocumentBytes {
			return nil, fmt.Errorf("%w: %d bytes, more than the limit of %d", engine.ErrCorruptBundle, len(raw), MaxDocumentBytes)
		}
		return raw, nil
	}
	// A gzip stream ends with its inflated size (mod 2^32): one that owns up
	// to being too large is refused before anything is inflated. The limit
	// below is what holds against one that lies.
	var size uint32
	if len(raw) >= 4 {
		size = binary.LittleEndian.Uint32(raw[len(raw)-4:])
		if size > MaxDocumentBytes {
			return nil, fmt.Errorf("%w: gzip says it decompresses to %d bytes, more than the limit of %d", engine.ErrCorruptBundle, size, MaxDocumentBytes)
		}
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: gzip: %v", engine.ErrCorruptBundle, err)
	}
	doc, err := readAtMost(zr, int(size), MaxDocumentBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: gzip: %v", engine.ErrCorruptBundle, err)
	}
	if len(doc) > MaxDocumentBytes {
		return nil, fmt.Errorf("%w: decompresses to more than the limit of %d bytes", engine.ErrCorruptBundle, MaxDocumentBytes)
	}
	return doc, nil
}

// readAtMost reads r to its end, or to one byte past limit, into a buffer
// sized for hint bytes; past the hint it grows once, straight to the limit,
// so reading allocates at most hint+limit bytes, not the doublings of
// io.ReadAll.
func readAtMost(r io.Reader, hint, limit int) ([]byte, error) {
	buf := make([]byte, 0, min(hint, limit)+bytes.MinRead)
	for {
		if len(buf) == cap(buf) {
			if len(buf) > limit {
				return buf, nil
			}
			grown := make([]byte, len(buf), limit+1)
			copy(grown, buf)
			buf = grown
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
