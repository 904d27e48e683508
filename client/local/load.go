package local

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/manifest"
)

// loadBundle reads a bundle document (what `toolgate bundle` prints, gzip
// when the name ends in .gz) or a directory of Policy and FrozenAgent
// manifests, and compiles it. A directory is built into a bundle document
// and decoded like a file, so both take the one path the sidecar takes.
// Compile diagnostics do not fail the load: as in the sidecar, a policy
// that does not compile denies POLICY_COMPILE_ERROR when reached, so
// compiling is left to the caller, which skips it for a revision it has.
func loadBundle(path string) (engine.Bundle, error) {
	info, err := os.Stat(path)
	if err != nil {
		return engine.Bundle{}, fmt.Errorf("toolgate: bundle %s: %w", path, err)
	}
	var doc []byte
	if info.IsDir() {
		if doc, err = buildDir(path); err != nil {
			return engine.Bundle{}, fmt.Errorf("toolgate: bundle %s: %w", path, err)
		}
	} else {
		raw, err := os.ReadFile(path)
		if err != nil {
			return engine.Bundle{}, fmt.Errorf("toolgate: bundle %s: %w", path, err)
		}
		if doc, err = bundle.ReadDocument(raw, strings.HasSuffix(path, ".gz")); err != nil {
			return engine.Bundle{}, fmt.Errorf("toolgate: bundle %s: %w", path, err)
		}
	}
	b, err := engine.Decode(doc)
	if err != nil {
		return engine.Bundle{}, fmt.Errorf("toolgate: bundle %s: %w", path, err)
	}
	return b, nil
}

// buildDir builds the bundle of a manifest directory with
// manifest.LoadBundle, the function `toolgate eval -f DIR` uses. A bundle
// is per namespace, so objects of several namespaces are refused (the
// CLI's -n has no counterpart here).
func buildDir(dir string) ([]byte, error) {
	_, b, err := manifest.LoadBundle([]string{dir}, nil, "", time.Now())
	if err != nil {
		return nil, err
	}
	doc, _, err := engine.Encode(b)
	return doc, err
}
