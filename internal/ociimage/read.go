package ociimage

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Layout is what an OCI image layout archive holds, read back: the name
// index.json gives the image and its image for each platform.
type Layout struct {
	Ref string
	// Digest is the manifest's digest for a single-platform archive (Write),
	// the image index's for a multi-platform one (WriteIndex).
	Digest    string
	Platforms []PlatformImage
}

// PlatformImage is one platform's image: the platform its descriptor
// declares, its config, and the files of its layers by path (no leading /).
type PlatformImage struct {
	OS, Arch string
	Digest   string // the manifest's
	Config   Config
	Files    map[string][]byte
}

// Read reads an archive Write or WriteIndex wrote (or any OCI layout whose
// index.json names one image, a manifest or an image index of manifests,
// with uncompressed layers). Every blob it reads must match its digest.
func Read(archive string) (Layout, error) {
	var l Layout
	f, err := os.Open(archive)
	if err != nil {
		return l, err
	}
	defer f.Close()
	entries := map[string][]byte{}
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return l, fmt.Errorf("%s: %w", archive, err)
		}
		if entries[h.Name], err = io.ReadAll(tr); err != nil {
			return l, fmt.Errorf("%s: %s: %w", archive, h.Name, err)
		}
	}
	blob := func(d descriptor) ([]byte, error) {
		b, ok := entries["blobs/sha256/"+strings.TrimPrefix(d.Digest, "sha256:")]
		if !ok {
			return nil, fmt.Errorf("%s: blob %s is missing", archive, d.Digest)
		}
		if digest(b) != d.Digest || int64(len(b)) != d.Size {
			return nil, fmt.Errorf("%s: blob %s does not match its digest or size", archive, d.Digest)
		}
		return b, nil
	}
	var index struct{ Manifests []descriptor }
	if err := json.Unmarshal(entries["index.json"], &index); err != nil || len(index.Manifests) != 1 {
		return l, fmt.Errorf("%s: index.json: want one image (%v)", archive, err)
	}
	top := index.Manifests[0]
	l.Ref, l.Digest = top.Annotations["io.containerd.image.name"], top.Digest
	manifests := []descriptor{top}
	if top.MediaType == mediaIndex {
		b, err := blob(top)
		if err != nil {
			return l, err
		}
		var nested struct{ Manifests []descriptor }
		if err := json.Unmarshal(b, &nested); err != nil {
			return l, fmt.Errorf("%s: image index: %w", archive, err)
		}
		manifests = nested.Manifests
	}
	for _, d := range manifests {
		p, err := readPlatform(d, blob)
		if err != nil {
			return l, fmt.Errorf("%s: %w", archive, err)
		}
		l.Platforms = append(l.Platforms, p)
	}
	return l, nil
}

func readPlatform(d descriptor, blob func(descriptor) ([]byte, error)) (PlatformImage, error) {
	p := PlatformImage{OS: d.Platform["os"], Arch: d.Platform["architecture"], Digest: d.Digest, Files: map[string][]byte{}}
	b, err := blob(d)
	if err != nil {
		return p, err
	}
	var manifest struct {
		Config descriptor
		Layers []descriptor
	}
	if err := json.Unmarshal(b, &manifest); err != nil {
		return p, fmt.Errorf("manifest %s: %w", d.Digest, err)
	}
	if b, err = blob(manifest.Config); err != nil {
		return p, err
	}
	if err := json.Unmarshal(b, &p.Config); err != nil {
		return p, fmt.Errorf("config %s: %w", manifest.Config.Digest, err)
	}
	for _, ld := range manifest.Layers {
		layer, err := blob(ld)
		if err != nil {
			return p, err
		}
		tr := tar.NewReader(bytes.NewReader(layer))
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return p, fmt.Errorf("layer %s: %w", ld.Digest, err)
			}
			if h.Typeflag == tar.TypeReg {
				if p.Files[h.Name], err = io.ReadAll(tr); err != nil {
					return p, fmt.Errorf("layer %s: %w", ld.Digest, err)
				}
			}
		}
	}
	return p, nil
}

// ReadConfig returns the image config of the (single-platform) image in an
// archive Write wrote, with its ref name.
func ReadConfig(archive string) (Config, string, error) {
	l, err := Read(archive)
	if err != nil {
		return Config{}, "", err
	}
	if len(l.Platforms) != 1 {
		return Config{}, "", fmt.Errorf("%s: %d platforms, want one", archive, len(l.Platforms))
	}
	return l.Platforms[0].Config, l.Ref, nil
}
