package sidecar

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/toolgate/toolgate/bundle"
)

// --bundle-dir is a mounted bundle ConfigMap here, while `toolgate hook`
// and `toolgate mcp stdio` read Policy manifests under the same flag name.
// Pointed at manifests, the sidecar used to find no bundle key and answer
// NO_POLICIES forever without a word; checkBundleDir says at start what the
// directory holds and refuses a directory of manifests.

// manifestSniff is how much of a file is read to tell a toolgate manifest.
const manifestSniff = 64 << 10

// toolgateAPIVersion finds `apiVersion: toolgate.dev/...` as YAML (block
// or flow, quoted or not) or JSON writes it.
var toolgateAPIVersion = regexp.MustCompile(`"?apiVersion"?\s*:\s*["']?toolgate\.dev/`)

// checkBundleDir logs what dir holds and fails when it holds toolgate
// manifests and no bundle key. An empty or missing directory is a
// ConfigMap not published yet (the volume is optional): logged, not
// refused, as decisions deny NO_POLICIES until it is.
func checkBundleDir(dir string, log *slog.Logger) error {
	var keys []string
	for _, k := range []string{bundle.Key, bundle.GzipKey} {
		if _, err := os.Stat(filepath.Join(dir, k)); err == nil {
			keys = append(keys, k)
		}
	}
	if len(keys) > 0 {
		log.Info("bundle source: --bundle-dir, a mounted bundle ConfigMap", "dir", filepath.Clean(dir), "keys", keys)
		return nil
	}
	if manifests := toolgateManifests(dir); len(manifests) > 0 {
		return fmt.Errorf("--bundle-dir %s holds toolgate manifests (%s), not a bundle: the sidecar's --bundle-dir is a mounted "+
			"bundle ConfigMap (%s or %s). Build a bundle from the manifests with `toolgate bundle -f %s -o bundle.json` "+
			"and serve it with --bundle-file bundle.json", dir, strings.Join(manifests, ", "), bundle.Key, bundle.GzipKey, dir)
	}
	log.Warn("bundle source: --bundle-dir, a mounted bundle ConfigMap", "dir", filepath.Clean(dir), "keys", keys,
		"note", fmt.Sprintf("no %s or %s yet: every decision is deny NO_POLICIES until the bundle ConfigMap is published", bundle.Key, bundle.GzipKey))
	return nil
}

// toolgateManifests names the files directly in dir (a ConfigMap volume
// is flat) that look like toolgate manifests.
func toolgateManifests(dir string) []string {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil // the source reports an unreadable directory itself
	}
	var found []string
	for _, e := range entries {
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".yaml", ".yml", ".json":
		default:
			continue
		}
		if head, err := readHead(filepath.Join(dir, e.Name())); err == nil && toolgateAPIVersion.Match(head) {
			found = append(found, e.Name())
		}
	}
	return found
}

// readHead reads the first manifestSniff bytes of a regular file
// (following symlinks, as kubelet's keys are).
func readHead(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	if info, err := f.Stat(); err != nil || !info.Mode().IsRegular() {
		return nil, errors.Join(err, errors.New("not a regular file"))
	}
	return io.ReadAll(io.LimitReader(f, manifestSniff))
}
