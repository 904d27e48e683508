//go:build release

// Package release runs `make release` as a user would, into a temporary
// DIST, and checks what it wrote the way each artifact's consumer reads it:
// sha256sum, the binaries run and parsed (debug/elf, debug/macho), the
// image's index and layers, the chart's Chart.yaml, the wheel's METADATA,
// the npm tarball's package.json, the SBOMs' CycloneDX JSON. It builds four
// binaries and the clients (minutes), so it has a build tag and a make
// target of its own: make test-release.
package release

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"debug/macho"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/toolgate/toolgate/internal/ociimage"
	"github.com/toolgate/toolgate/internal/testenv"
)

const (
	tag     = "v0.0.0-test"
	version = "0.0.0-test"
	// PEP 440 has no SemVer pre-release: a label other than alpha, beta or
	// rc becomes a local version.
	pyVersion = "0.0.0+test"
)

var (
	elfMachine   = map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	machoCPU     = map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}
	binaryArches = []string{"amd64", "arm64"}
)

func makeRelease(t *testing.T, dist, version string) (string, error) {
	t.Helper()
	cmd := exec.Command("make", "--no-print-directory", "release", "VERSION="+version, "DIST="+dist)
	cmd.Dir = testenv.RepoRoot()
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestReleaseRefusesAMalformedVersion: a VERSION that is not vX.Y.Z fails
// with an error saying so, before anything is built or written.
func TestReleaseRefusesAMalformedVersion(t *testing.T) {
	for _, v := range []string{"1.2.3", "v1.2", "v1.2.3+build", "latest"} {
		dist := filepath.Join(t.TempDir(), "dist")
		out, err := makeRelease(t, dist, v)
		if err == nil {
			t.Errorf("make release VERSION=%s succeeded:\n%s", v, out)
		}
		if !strings.Contains(out, `VERSION="`+v+`" is not a release tag: want vX.Y.Z`) {
			t.Errorf("make release VERSION=%s: no clear error:\n%s", v, out)
		}
		if strings.Contains(out, "npm") || strings.Contains(out, "go build") {
			t.Errorf("make release VERSION=%s built something before refusing:\n%s", v, out)
		}
		if _, err := os.Stat(dist); !os.IsNotExist(err) {
			t.Errorf("make release VERSION=%s created DIST (%v)", v, err)
		}
	}
}

func TestReleaseArtifacts(t *testing.T) {
	dist := filepath.Join(t.TempDir(), "dist")
	started := time.Now()
	out, err := makeRelease(t, dist, tag)
	if err != nil {
		t.Fatalf("make release VERSION=%s: %v\n%s", tag, err, out)
	}
	t.Logf("make release VERSION=%s took %v\n%s", tag, time.Since(started).Round(time.Second), out)
	path := func(name string) string { return filepath.Join(dist, name) }
	want := []string{
		"SHA256SUMS",
		"toolgate_" + version + "_image.oci.tar", "toolgate_" + version + "_image.cdx.json",
		"toolgate-" + version + ".tgz",
		"toolgate-" + pyVersion + ".tar.gz", "toolgate-" + pyVersion + "-py3-none-any.whl",
		"toolgate-client-" + version + ".tgz",
	}
	for _, goos := range []string{"linux", "darwin"} {
		for _, arch := range binaryArches {
			bin := "toolgate_" + version + "_" + goos + "_" + arch
			want = append(want, bin, bin+".cdx.json")
		}
	}
	entries, err := os.ReadDir(dist)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("dist holds\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}

	t.Run("SHA256SUMS", func(t *testing.T) {
		sums, err := os.ReadFile(path("SHA256SUMS"))
		if err != nil {
			t.Fatal(err)
		}
		var listed []string
		for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
			_, name, _ := strings.Cut(line, "  ")
			listed = append(listed, name)
		}
		if others := slices.DeleteFunc(slices.Clone(want), func(n string) bool { return n == "SHA256SUMS" }); !slices.Equal(listed, others) {
			t.Errorf("SHA256SUMS lists %v, want every other artifact %v", listed, others)
		}
		cmd := exec.Command("sha256sum", "--strict", "-c", "SHA256SUMS")
		cmd.Dir = dist
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("sha256sum -c SHA256SUMS: %v\n%s", err, out)
		}
	})

	t.Run("binaries", func(t *testing.T) {
		self := path("toolgate_" + version + "_" + runtime.GOOS + "_" + runtime.GOARCH)
		out, err := exec.Command(self, "version").CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "toolgate "+tag+" ") {
			t.Errorf("%s version: %v: %q, want toolgate %s", filepath.Base(self), err, out, tag)
		}
		for _, arch := range binaryArches {
			if m := elfArch(t, path("toolgate_"+version+"_linux_"+arch)); m != elfMachine[arch] {
				t.Errorf("linux/%s binary is for %v", arch, m)
			}
			f, err := macho.Open(path("toolgate_" + version + "_darwin_" + arch))
			if err != nil {
				t.Errorf("darwin/%s binary is not Mach-O: %v", arch, err)
				continue
			}
			if f.Cpu != machoCPU[arch] || f.Type != macho.TypeExec {
				t.Errorf("darwin/%s binary: cpu %v, type %v", arch, f.Cpu, f.Type)
			}
			_ = f.Close()
		}
	})

	var imageDigest string
	t.Run("image", func(t *testing.T) {
		l, err := ociimage.Read(path("toolgate_" + version + "_image.oci.tar"))
		if err != nil {
			t.Fatal(err)
		}
		imageDigest = l.Digest
		if l.Ref != "toolgate.local/toolgate:"+version {
			t.Errorf("image named %q, want toolgate.local/toolgate:%s", l.Ref, version)
		}
		var platforms []string
		for _, p := range l.Platforms {
			platforms = append(platforms, p.OS+"/"+p.Arch)
			if p.Config.OS != p.OS || p.Config.Architecture != p.Arch {
				t.Errorf("%s/%s: config says %s/%s", p.OS, p.Arch, p.Config.OS, p.Config.Architecture)
			}
			bin, ok := p.Files[strings.TrimPrefix(ociimage.ToolgateBinary, "/")]
			if !ok {
				t.Errorf("%s/%s: no %s in the layer", p.OS, p.Arch, ociimage.ToolgateBinary)
				continue
			}
			f, err := elf.NewFile(bytes.NewReader(bin))
			if err != nil {
				t.Errorf("%s/%s: %s is not ELF: %v", p.OS, p.Arch, ociimage.ToolgateBinary, err)
				continue
			}
			if f.Machine != elfMachine[p.Arch] {
				t.Errorf("%s/%s: %s is for %v", p.OS, p.Arch, ociimage.ToolgateBinary, f.Machine)
			}
			if released, _ := os.ReadFile(path("toolgate_" + version + "_linux_" + p.Arch)); !bytes.Equal(bin, released) {
				t.Errorf("%s/%s: the image's binary is not the released toolgate_%s_linux_%s", p.OS, p.Arch, version, p.Arch)
			}
		}
		if !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
			t.Errorf("image index lists %v, want linux/amd64 and linux/arm64", platforms)
		}
	})

	t.Run("chart", func(t *testing.T) {
		var chart struct{ Version, AppVersion string }
		if err := yaml.Unmarshal(fromTarGz(t, path("toolgate-"+version+".tgz"), "toolgate/Chart.yaml"), &chart); err != nil {
			t.Fatal(err)
		}
		if chart.Version != version || chart.AppVersion != version {
			t.Errorf("chart version %q, appVersion %q, want %s", chart.Version, chart.AppVersion, version)
		}
	})

	t.Run("python", func(t *testing.T) {
		z, err := zip.OpenReader(path("toolgate-" + pyVersion + "-py3-none-any.whl"))
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = z.Close() }()
		f, err := z.Open("toolgate-" + pyVersion + ".dist-info/METADATA")
		if err != nil {
			t.Fatal(err)
		}
		metadata, _ := io.ReadAll(f)
		assertPythonMetadata(t, "wheel METADATA", string(metadata))
		// The package's own __version__ is the release's too.
		init, err := z.Open("toolgate/__init__.py")
		if err != nil {
			t.Fatal(err)
		}
		initPy, err := io.ReadAll(init)
		_ = init.Close()
		if err != nil || !strings.Contains(string(initPy), "\n__version__ = \""+pyVersion+"\"\n") {
			t.Errorf("the wheel's toolgate/__init__.py does not say __version__ = %q (%v)", pyVersion, err)
		}
		assertPythonMetadata(t, "sdist PKG-INFO", string(fromTarGz(t, path("toolgate-"+pyVersion+".tar.gz"), "toolgate-"+pyVersion+"/PKG-INFO")))
	})

	t.Run("npm", func(t *testing.T) {
		var pkg struct{ Name, Version string }
		if err := json.Unmarshal(fromTarGz(t, path("toolgate-client-"+version+".tgz"), "package/package.json"), &pkg); err != nil {
			t.Fatal(err)
		}
		if pkg.Name != "@toolgate/client" || pkg.Version != version {
			t.Errorf("npm tarball: package/package.json is %s@%s, want @toolgate/client@%s", pkg.Name, pkg.Version, version)
		}
		fromTarGz(t, path("toolgate-client-"+version+".tgz"), "package/dist/index.js")
	})

	t.Run("SBOMs", func(t *testing.T) {
		for _, goos := range []string{"linux", "darwin"} {
			for _, arch := range binaryArches {
				bom := readBOM(t, path("toolgate_"+version+"_"+goos+"_"+arch+".cdx.json"))
				if c := bom.Metadata.Component; c.Name != "github.com/toolgate/toolgate" || c.Version != tag || !strings.Contains(c.PURL, "goos="+goos) || !strings.Contains(c.PURL, "goarch="+arch) {
					t.Errorf("%s/%s SBOM describes %+v", goos, arch, c)
				}
			}
		}
		bom := readBOM(t, path("toolgate_"+version+"_image.cdx.json"))
		image := bom.Metadata.Component
		var platforms []string
		for _, p := range image.Properties {
			if p.Name == "oci:platform" {
				platforms = append(platforms, p.Value)
			}
		}
		if image.Type != "container" || image.Name != "toolgate.local/toolgate:"+version || image.Version != imageDigest ||
			!slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
			t.Errorf("image SBOM describes %+v, want the container toolgate.local/toolgate:%s@%s for linux/amd64 and linux/arm64", image, version, imageDigest)
		}
	})
}

func assertPythonMetadata(t *testing.T, what, metadata string) {
	t.Helper()
	if !strings.Contains(metadata, "\nVersion: "+pyVersion+"\n") {
		t.Errorf("%s does not name version %s:\n%s", what, pyVersion, metadata)
	}
	if !strings.Contains(metadata, "\nLicense: Apache-2.0\n") && !strings.Contains(metadata, "\nLicense-Expression: Apache-2.0\n") &&
		!strings.Contains(metadata, "\nClassifier: License :: OSI Approved :: Apache Software License\n") {
		t.Errorf("%s does not name the license Apache-2.0:\n%s", what, metadata)
	}
}

func elfArch(t *testing.T, path string) elf.Machine {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Errorf("%s is not ELF: %v", filepath.Base(path), err)
		return elf.EM_NONE
	}
	defer func() { _ = f.Close() }()
	return f.Machine
}

func fromTarGz(t *testing.T, archive, name string) []byte {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(archive), err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s: no %s (%v)", filepath.Base(archive), name, err)
		}
		if h.Name == name {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}

// component is the part of a CycloneDX component the test reads.
type component struct {
	Type       string      `json:"type"`
	Name       string      `json:"name"`
	Version    string      `json:"version"`
	PURL       string      `json:"purl"`
	Components []component `json:"components"`
	Properties []struct{ Name, Value string }
}

type bom struct {
	BOMFormat   string `json:"bomFormat"`
	SpecVersion string `json:"specVersion"`
	Metadata    struct {
		Component component `json:"component"`
	} `json:"metadata"`
	Components []component `json:"components"`
}

// readBOM parses a CycloneDX JSON SBOM and checks it names the Go modules
// the binary is built from (client-go among them, at any depth).
func readBOM(t *testing.T, path string) bom {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var b bom
	if err := json.Unmarshal(data, &b); err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
	if b.BOMFormat != "CycloneDX" || !strings.HasPrefix(b.SpecVersion, "1.") {
		t.Errorf("%s: bomFormat %q specVersion %q, want CycloneDX 1.x", filepath.Base(path), b.BOMFormat, b.SpecVersion)
	}
	var names func([]component) bool
	names = func(cs []component) bool {
		for _, c := range cs {
			if c.Name == "k8s.io/client-go" && strings.HasPrefix(c.PURL, "pkg:golang/k8s.io/client-go@") || names(c.Components) {
				return true
			}
		}
		return false
	}
	if !names(b.Components) {
		t.Errorf("%s: no component k8s.io/client-go", filepath.Base(path))
	}
	return b
}
