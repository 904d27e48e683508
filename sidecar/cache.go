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

// read returns nil, nil when nothing is cached.
func (c *bundleCache) read() ([]byte, error) {
	doc, err := os.ReadFile(c.path())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the cached bundle: %w", err)
	}
	return doc, nil
}

// save writes atomically (temporary file, fsync, rename): a crash never
// leaves a half-written cache, which would be rejected at the next start
// anyway but would lose the last good bundle.
func (c *bundleCache) save(doc []byte) error {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(c.dir, c.name+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name()) // no-op after the rename
	if _, err := f.Write(doc); err != nil {
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
	return os.Rename(f.Name(), c.path())
}

func (c *bundleCache) remove() error {
	err := os.Remove(c.path())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}
