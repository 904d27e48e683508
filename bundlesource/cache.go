package bundlesource

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/toolgate/toolgate/internal/atomicfile"
)

// bundleCache keeps the last good bundle document on local disk, so a
// sidecar restarted while the API server is unreachable still serves it.
type bundleCache struct {
	dir  string
	name string
}

// CacheFileName is the file in cfg.CacheDir the bundle is cached in,
// derived from the source, so a cache directory shared by mistake never
// hands one source's bundle to another.
func CacheFileName(cfg Config) string {
	sum := sha256.Sum256([]byte(cfg.ConfigMap + "\x00" + cfg.BundleDir + "\x00" + cfg.BundleFile))
	return "bundle-" + hex.EncodeToString(sum[:6]) + ".json"
}

func (c *bundleCache) path() string { return filepath.Join(c.dir, c.name) }

// sigPath holds the bundle's signature beside it: a cached bundle is
// verified at start like any other.
func (c *bundleCache) sigPath() string { return c.path() + ".sig" }

// endorsementsPath holds the bundle's endorsements, when it came with some:
// a bundle accepted through one must verify at the next start too.
func (c *bundleCache) endorsementsPath() string { return c.path() + ".endorsements" }

// counterPath keeps the highest publish counter loaded, and its revision.
// Unlike the bundle it survives an unload, so a sidecar restarted after the
// ConfigMap was deleted still refuses an older signed bundle put back.
func (c *bundleCache) counterPath() string { return c.path() + ".counter" }

// serviceAccountPath keeps the ServiceAccount the API server last said the
// sidecar runs as (learnServiceAccount).
func (c *bundleCache) serviceAccountPath() string { return c.path() + ".serviceaccount" }

func (c *bundleCache) readCounter() (uint64, string, error) {
	data, err := os.ReadFile(c.counterPath())
	if errors.Is(err, fs.ErrNotExist) {
		return 0, "", nil
	}
	if err != nil {
		return 0, "", err
	}
	var n uint64
	var rev string
	if _, err := fmt.Sscanf(string(data), "%d %s", &n, &rev); err != nil {
		return 0, "", fmt.Errorf("%s: %w", c.counterPath(), err)
	}
	return n, rev, nil
}

func (c *bundleCache) saveCounter(n uint64, rev string) error {
	return c.write(c.counterPath(), fmt.Appendf(nil, "%d %s\n", n, rev))
}

// read returns a nil doc when nothing is cached, and a nil sig when the
// bundle was cached unsigned.
func (c *bundleCache) read() (doc []byte, sl Seal, err error) {
	doc, err = os.ReadFile(c.path())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, Seal{}, nil
	}
	if err != nil {
		return nil, Seal{}, fmt.Errorf("reading the cached bundle: %w", err)
	}
	if sl.Sig, err = readOptional(c.sigPath()); err != nil {
		return nil, Seal{}, fmt.Errorf("reading the cached bundle's signature: %w", err)
	}
	if sl.Endorsements, err = readOptional(c.endorsementsPath()); err != nil {
		return nil, Seal{}, fmt.Errorf("reading the cached bundle's endorsements: %w", err)
	}
	return doc, sl, nil
}

// save writes the seal, then the bundle. A crash in between leaves a
// set that does not verify, refused at the next start (fail closed).
func (c *bundleCache) save(doc []byte, sl Seal) error {
	if err := c.writeOrRemove(c.sigPath(), sl.Sig); err != nil {
		return err
	}
	if err := c.writeOrRemove(c.endorsementsPath(), sl.Endorsements); err != nil {
		return err
	}
	return c.write(c.path(), doc)
}

// writeOrRemove writes data to path, or removes path when data is nil.
func (c *bundleCache) writeOrRemove(path string, data []byte) error {
	if data == nil {
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return c.write(path, data)
}

// write writes atomically: a crash never leaves a half-written cache,
// which would be rejected at the next start anyway but would lose the last
// good bundle.
func (c *bundleCache) write(path string, data []byte) error {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return err
	}
	return atomicfile.Write(path, data, 0o600)
}

func (c *bundleCache) remove() error {
	err := os.Remove(c.path())
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	for _, p := range []string{c.sigPath(), c.endorsementsPath()} {
		if perr := os.Remove(p); perr != nil && !errors.Is(perr, fs.ErrNotExist) {
			err = errors.Join(err, perr)
		}
	}
	return err
}
