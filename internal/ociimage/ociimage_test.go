package ociimage

import (
	"archive/tar"
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestWriteIsReproducibleAndReadable(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.WriteFile(bin, []byte("binary"), 0o755); err != nil {
		t.Fatal(err)
	}
	a, b := filepath.Join(dir, "a.tar"), filepath.Join(dir, "b.tar")
	da, err := Write(a, Toolgate("example.com/toolgate:v1", bin))
	if err != nil {
		t.Fatal(err)
	}
	db, err := Write(b, Toolgate("example.com/toolgate:v1", bin))
	if err != nil {
		t.Fatal(err)
	}
	ab, _ := os.ReadFile(a)
	bb, _ := os.ReadFile(b)
	if da != db || !bytes.Equal(ab, bb) {
		t.Error("two writes of the same image differ")
	}
	cfg, ref, err := ReadConfig(a)
	if err != nil {
		t.Fatal(err)
	}
	if ref != "example.com/toolgate:v1" || !slices.Equal(cfg.Config.Entrypoint, []string{ToolgateBinary}) || cfg.Config.User != ToolgateUser {
		t.Errorf("ref %q, config %+v", ref, cfg.Config)
	}
	if len(cfg.RootFS.DiffIDs) != 1 {
		t.Errorf("diff ids %v", cfg.RootFS.DiffIDs)
	}
}

func TestLayerHasTheFilesAndTheirParents(t *testing.T) {
	layer, err := layerTar([]File{
		{Path: "/usr/bin/tool", Mode: 0o755, Data: []byte("x")},
		{Path: "/tmp", Mode: 0o1777, Dir: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	tr := tar.NewReader(bytes.NewReader(layer))
	for {
		h, err := tr.Next()
		if err != nil {
			break
		}
		got[h.Name] = h.Mode
	}
	want := map[string]int64{"tmp/": 0o1777, "usr/": 0o755, "usr/bin/": 0o755, "usr/bin/tool": 0o755}
	for name, mode := range want {
		if got[name] != mode {
			t.Errorf("%s: mode %o, want %o (layer: %v)", name, got[name], mode, got)
		}
	}
	if _, err := layerTar([]File{{Path: "relative"}}); err == nil {
		t.Error("a relative path was accepted")
	}
}

// TestWriteIndexHasOneImagePerPlatform: a multi-platform archive names one
// image whose index lists each platform once, and each platform's config
// and layer are the ones given for it.
func TestWriteIndexHasOneImagePerPlatform(t *testing.T) {
	dir := t.TempDir()
	var images []Image
	for _, arch := range []string{"amd64", "arm64"} {
		bin := filepath.Join(dir, arch)
		if err := os.WriteFile(bin, []byte("binary for "+arch), 0o755); err != nil {
			t.Fatal(err)
		}
		img := Toolgate("example.com/toolgate:1.2.3", bin)
		img.Arch = arch
		images = append(images, img)
	}
	out := filepath.Join(dir, "multi.tar")
	d, err := WriteIndex(out, "example.com/toolgate:1.2.3", images)
	if err != nil {
		t.Fatal(err)
	}
	l, err := Read(out)
	if err != nil {
		t.Fatal(err)
	}
	if l.Ref != "example.com/toolgate:1.2.3" || l.Digest != d {
		t.Errorf("ref %q digest %s, want example.com/toolgate:1.2.3 %s", l.Ref, l.Digest, d)
	}
	if len(l.Platforms) != 2 {
		t.Fatalf("%d platforms, want 2: %+v", len(l.Platforms), l.Platforms)
	}
	for i, arch := range []string{"amd64", "arm64"} {
		p := l.Platforms[i]
		if p.OS != "linux" || p.Arch != arch || p.Config.OS != "linux" || p.Config.Architecture != arch {
			t.Errorf("platform %d: descriptor %s/%s, config %s/%s, want linux/%s", i, p.OS, p.Arch, p.Config.OS, p.Config.Architecture, arch)
		}
		if got := string(p.Files[ToolgateBinary[1:]]); got != "binary for "+arch {
			t.Errorf("linux/%s: %s holds %q", arch, ToolgateBinary, got)
		}
	}
	if _, err := WriteIndex(out, "example.com/toolgate:1.2.3", []Image{images[0], images[0]}); err == nil {
		t.Error("two images for linux/amd64 were accepted")
	}
}
