package sidecar

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// bundleCache keeps the last good bundle document on local disk, so a
// sidecar restarted while the API server is unreachable still serves it.
type bundleCache struct {
	dir  string
	name string
}

// cacheFileName is derived from the source, so a cache directory shared by
// mistake never hands one source's bundle to another.
func cacheFileName(o Options) string {
	sum := sha256.Sum256([]byte(o.ConfigMap + "\x00" + o.BundleDir + "\x00" + o.BundleFile))
	return "bundle-" + hex.EncodeToString(sum[:6]) + ".json"
}

func (c *bundleCache) path() string { return filepath.Join(c.dir, c.name) }

// sigPath holds the bundle's signature beside it: a cached bundle is
// verified at start like any other.
func (c *bundleCache) sigPath() string { return c.path() + ".sig" }

// counterPath keeps the highest publish counter loaded, and its revision.
// Unlike the bundle it survives an unload, so a sidecar restarted after the
// ConfigMap was deleted still refuses an older signed bundle put back.
func (c *bundleCache) counterPath() string { return c.path() + ".counter" }

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

// read returns nil, nil, nil when nothing is cached, and a nil sig when
// the bundle was cached unsigned.
func (c *bundleCache) read() (doc, sig []byte, err error) {
	doc, err = os.ReadFile(c.path())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("reading the cached bundle: %w", err)
	}
	sig, err = os.ReadFile(c.sigPath())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, nil, fmt.Errorf("reading the cached bundle's signature: %w", err)
	}
	return doc, sig, nil
}

// save writes the signature, then the bundle. A crash in between leaves a
// pair that does not verify, refused at the next start (fail closed).
func (c *bundleCache) save(doc, sig []byte) error {
	if sig == nil {
		if err := os.Remove(c.sigPath()); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	} else if err := c.write(c.sigPath(), sig); err != nil {
		return err
	}
	return c.write(c.path(), doc)
}

// write writes atomically (temporary file, fsync, rename): a crash never
// leaves a half-written cache, which would be rejected at the next start
// anyway but would lose the last good bundle.
func (c *bundleCache) write(path string, data []byte) error {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(c.dir, c.name+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // no-op after the rename
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}

func (c *bundleCache) remove() error {
	err := os.Remove(c.path())
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	if serr := os.Remove(c.sigPath()); serr != nil && !errors.Is(serr, fs.ErrNotExist) {
		return errors.Join(err, serr)
	}
	return err
}
