package bundlesource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/toolgate/toolgate/bundle"
)

// kubeletDataLink is the symlink kubelet's atomic writer swaps to publish a
// new version of a ConfigMap volume in one rename.
const kubeletDataLink = "..data"

// maxSnapshotTries bounds re-reads when ..data moves while a directory is
// being read.
const maxSnapshotTries = 5

// pathSource watches a file or a mounted ConfigMap directory with fsnotify,
// and re-reads it every poll interval in case an event was missed.
type pathSource struct {
	origin   string
	watchDir string
	poll     time.Duration
	// read returns the bundle bytes, its seal (nil parts when there are
	// none), whether they are gzip, and found=false when the source has no
	// bundle at all.
	read func() (raw []byte, sl Seal, gzipped, found bool, err error)
	// relevant filters events; nil means every event in watchDir.
	relevant func(fsnotify.Event) bool

	last     []byte
	lastSeal Seal
	lastGzip bool
	seen     bool
}

func newFileSource(path string, poll time.Duration) *pathSource {
	path = filepath.Clean(path)
	gz := strings.HasSuffix(path, ".gz")
	return &pathSource{
		origin: OriginBundleFile, watchDir: filepath.Dir(path), poll: poll,
		read: func() ([]byte, Seal, bool, bool, error) {
			raw, err := os.ReadFile(path)
			if errors.Is(err, fs.ErrNotExist) {
				return nil, Seal{}, false, false, nil
			}
			if err != nil {
				return nil, Seal{}, false, false, err
			}
			sl, err := readSeal(path+".sig", path+".endorsements")
			return raw, sl, gz, err == nil, err
		},
		// Editors and kubectl cp replace a file by renaming another over it,
		// so the directory is watched and events are matched by name.
		relevant: func(ev fsnotify.Event) bool {
			name := filepath.Clean(ev.Name)
			return name == path || name == path+".sig" || name == path+".endorsements"
		},
	}
}

func newDirSource(dir string, poll time.Duration) *pathSource {
	return &pathSource{origin: OriginBundleDir, watchDir: dir, poll: poll,
		read: func() ([]byte, Seal, bool, bool, error) { return readBundleDir(dir) }}
}

// readSeal reads a bundle's signature and endorsements files, either of
// which may be missing.
func readSeal(sigPath, endorsementsPath string) (Seal, error) {
	sig, err := readOptional(sigPath)
	if err != nil {
		return Seal{}, err
	}
	endorsements, err := readOptional(endorsementsPath)
	if err != nil {
		return Seal{}, err
	}
	return Seal{Sig: sig, Endorsements: endorsements}, nil
}

// readOptional reads a file that may be missing (nil, nil).
func readOptional(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return data, err
}

// readBundleDir reads bundle.json or bundle.json.gz from a ConfigMap volume.
// When kubelet's ..data link exists it reads through the directory the link
// points to and checks the link did not move meanwhile, so both keys come
// from one published version: reading the top-level symlinks during a swap
// could see neither key and wrongly conclude the bundle was deleted.
func readBundleDir(dir string) ([]byte, Seal, bool, bool, error) {
	for range maxSnapshotTries {
		target, err := os.Readlink(filepath.Join(dir, kubeletDataLink))
		if errors.Is(err, fs.ErrNotExist) {
			return readBundleKeys(dir) // a plain directory
		}
		if err != nil {
			return nil, Seal{}, false, false, fmt.Errorf("reading %s: %w", kubeletDataLink, err)
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(dir, target)
		}
		raw, sl, gz, found, err := readBundleKeys(target)
		after, lerr := os.Readlink(filepath.Join(dir, kubeletDataLink))
		if lerr == nil && (after == target || filepath.Join(dir, after) == target) {
			return raw, sl, gz, found, err
		}
	}
	return nil, Seal{}, false, false, fmt.Errorf("%s kept moving while it was read", filepath.Join(dir, kubeletDataLink))
}

// readBundleKeys reads the bundle keys and the seal of one version.
func readBundleKeys(dir string) ([]byte, Seal, bool, bool, error) {
	plain, perr := os.ReadFile(filepath.Join(dir, bundle.Key))
	zipped, zerr := os.ReadFile(filepath.Join(dir, bundle.GzipKey))
	plainMissing, zipMissing := errors.Is(perr, fs.ErrNotExist), errors.Is(zerr, fs.ErrNotExist)
	switch {
	case perr != nil && !plainMissing:
		return nil, Seal{}, false, false, perr
	case zerr != nil && !zipMissing:
		return nil, Seal{}, false, false, zerr
	}
	if plainMissing && zipMissing {
		// A chunked bundle's parts live in other ConfigMaps, which a volume
		// of the bundle ConfigMap does not show.
		if _, err := os.Stat(filepath.Join(dir, bundle.IndexKey)); err == nil {
			return nil, Seal{}, false, false, fmt.Errorf("%w: %s holds %s: the bundle is chunked across ConfigMaps, which a mounted volume cannot show; "+
				"use the API source (--configmap NAMESPACE/NAME), as injected sidecars do", bundle.ErrBadIndex, dir, bundle.IndexKey)
		}
	}
	sl, err := readSeal(filepath.Join(dir, bundle.SignatureKey), filepath.Join(dir, bundle.EndorsementsKey))
	if err != nil {
		return nil, Seal{}, false, false, err
	}
	raw, gz, found, err := bundle.PickKey(dir, plain, !plainMissing, zipped, !zipMissing)
	return raw, sl, gz, found, err
}

// Run watches and polls the path until ctx ends.
func (p *pathSource) Run(ctx context.Context, l *Loader) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("%s: %w", p.origin, err)
	}
	defer func() { _ = w.Close() }()
	if err := w.Add(p.watchDir); err != nil {
		return fmt.Errorf("%s: watching %s: %w", p.origin, p.watchDir, err)
	}
	p.sync(l)
	tick := time.NewTicker(p.poll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return fmt.Errorf("%s: the file watcher stopped", p.origin)
			}
			if p.relevant == nil || p.relevant(ev) {
				p.sync(l)
			}
		case err, ok := <-w.Errors:
			if !ok {
				return fmt.Errorf("%s: the file watcher stopped", p.origin)
			}
			// Usually an inotify queue overflow: events were lost, so
			// read again rather than wait for the next poll.
			l.log.Warn("file watch error; re-reading", "source", p.origin, "err", err)
			p.sync(l)
		case <-tick.C:
			p.sync(l)
		}
	}
}

// sync reads the source and loads it when its bytes changed. Bytes already
// rejected are not rejected again at every poll.
func (p *pathSource) sync(l *Loader) {
	raw, sl, gz, found, err := p.read()
	switch {
	case err != nil:
		l.reject(p.origin, err)
	case !found:
		p.last, p.lastSeal, p.seen = nil, Seal{}, false
		l.Unload(p.origin, "no bundle in "+p.watchDir)
	case p.seen && gz == p.lastGzip && bytes.Equal(raw, p.last) && sl.equal(p.lastSeal):
	default:
		p.last, p.lastSeal, p.lastGzip, p.seen = raw, sl, gz, true
		_ = l.LoadSealed(raw, gz, sl, p.origin)
	}
}
