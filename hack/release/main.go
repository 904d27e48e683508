// Command release builds a toolgate release into a directory, without
// Docker (`make release VERSION=vX.Y.Z`, docs/release.md): the binaries for
// linux and darwin on amd64 and arm64, the multi-platform image as an OCI
// archive, the packaged chart, the Python sdist and wheel, the npm tarball,
// CycloneDX SBOMs of the binaries and the image, and SHA256SUMS over them.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

type options struct {
	tag     string // vX.Y.Z, stamped into the binaries
	version string // X.Y.Z: image tag, chart, npm
	commit  string
	dist    string // absolute
	repo    string // the image's repository
	root    string // the repository's root, absolute
}

func main() {
	var o options
	flag.StringVar(&o.tag, "version", "", "the release tag, vX.Y.Z or vX.Y.Z-pre")
	flag.StringVar(&o.commit, "commit", "unknown", "the commit stamped into the binaries")
	flag.StringVar(&o.dist, "dist", "dist", "the directory to write (absent, empty, or a previous release's)")
	flag.StringVar(&o.repo, "image-repository", "toolgate.local/toolgate", "the image's repository; its tag is X.Y.Z")
	check := flag.Bool("check", false, "only check -version")
	flag.Parse()
	var err error
	if o.version, err = parseTag(o.tag); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(2)
	}
	if *check {
		return
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	var err error
	if o.root, err = os.Getwd(); err != nil {
		return err
	}
	if o.dist, err = filepath.Abs(o.dist); err != nil {
		return err
	}
	if err := prepareDist(o.dist); err != nil {
		return err
	}
	started := time.Now()
	steps := []struct {
		name string
		run  func(options) error
	}{
		{"binaries", buildBinaries},
		{"binary SBOMs", binarySBOMs},
		{"image and its SBOM", buildImage},
		{"chart", packageChart},
		{"Python sdist and wheel", buildPython},
		{"npm tarball", packNPM},
		{"SHA256SUMS", func(o options) error { return writeChecksums(o.dist) }},
	}
	for _, s := range steps {
		t := time.Now()
		if err := s.run(o); err != nil {
			return fmt.Errorf("%s: %w", s.name, err)
		}
		fmt.Printf("release: %-24s %v\n", s.name, time.Since(t).Round(100*time.Millisecond))
	}
	fmt.Printf("release: toolgate %s in %s, %v\n", o.tag, o.dist, time.Since(started).Round(time.Second))
	return nil
}

// prepareDist empties dist if it holds a previous release (its SHA256SUMS),
// and refuses any other non-empty directory: DIST=. must not delete a tree.
func prepareDist(dist string) error {
	entries, err := os.ReadDir(dist)
	if errors.Is(err, os.ErrNotExist) {
		return os.MkdirAll(dist, 0o755)
	}
	if err != nil || len(entries) == 0 {
		return err
	}
	if _, err := os.Stat(filepath.Join(dist, "SHA256SUMS")); err != nil {
		return fmt.Errorf("%s is not empty and holds no previous release (SHA256SUMS): give an empty or new DIST", dist)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dist, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// artifact is the path of a release file in dist: toolgate_X.Y.Z_suffix.
func (o options) artifact(suffix string) string {
	return filepath.Join(o.dist, "toolgate_"+o.version+"_"+suffix)
}
