// Package versioning checks that every place a toolgate version is written
// follows the one convention CHANGELOG.md states: a release is tagged
// vX.Y.Z; the binary reports the tag; the image, the Helm chart (version and
// appVersion) and the Python and TypeScript packages are X.Y.Z; the chart's
// default image tag is its appVersion.
package versioning

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/toolgate/toolgate/internal/testenv"
)

// plain is X.Y.Z with an optional pre-release (SemVer 2.0, no "v"), as Helm
// and both package registries want it.
var plain = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z.-]+)?$`)

func read(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), filepath.FromSlash(path)))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// chartVersion is Chart.yaml's version, checked to be X.Y.Z and equal to
// appVersion: the chart is released with the application it installs.
func chartVersion(t *testing.T) string {
	t.Helper()
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := yaml.Unmarshal(read(t, "charts/toolgate/Chart.yaml"), &chart); err != nil {
		t.Fatal(err)
	}
	if !plain.MatchString(chart.Version) {
		t.Errorf("Chart.yaml version %q is not X.Y.Z", chart.Version)
	}
	if chart.AppVersion != chart.Version {
		t.Errorf("Chart.yaml appVersion %q differs from version %q", chart.AppVersion, chart.Version)
	}
	return chart.Version
}

func TestPackagesShareTheChartVersion(t *testing.T) {
	want := chartVersion(t)

	var pkg struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(read(t, "clients/typescript/package.json"), &pkg); err != nil {
		t.Fatal(err)
	}
	if pkg.Version != want {
		t.Errorf("clients/typescript/package.json version %q, want the chart's %q", pkg.Version, want)
	}

	// The [project] table's version (tomllib is not in Go; the table is flat).
	project := string(read(t, "clients/python/pyproject.toml"))
	_, project, _ = strings.Cut(project, "\n[project]\n")
	project, _, _ = strings.Cut(project, "\n[")
	m := regexp.MustCompile(`(?m)^version\s*=\s*"([^"]*)"`).FindStringSubmatch(project)
	if m == nil {
		t.Fatal("clients/python/pyproject.toml: no version in [project]")
	}
	if m[1] != want {
		t.Errorf("clients/python/pyproject.toml version %q, want the chart's %q", m[1], want)
	}
}

// TestChartImageDefaultsToAppVersion renders the chart with its defaults:
// the image every workload runs is tagged with appVersion.
func TestChartImageDefaultsToAppVersion(t *testing.T) {
	want := chartVersion(t)
	var values struct {
		Image struct {
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
		} `json:"image"`
	}
	if err := yaml.Unmarshal(read(t, "charts/toolgate/values.yaml"), &values); err != nil {
		t.Fatal(err)
	}
	if values.Image.Tag != "" {
		t.Errorf("values.yaml image.tag is %q: leave it empty so the image follows appVersion", values.Image.Tag)
	}
	helm, err := testenv.InstallHelm()
	if err != nil {
		t.Fatal(err)
	}
	// The chart's kubeVersion refuses helm template's default (v1.20).
	out, err := helm.Run("template", "toolgate", testenv.ChartDir(), "--namespace", "toolgate-system", "--kube-version", "1.37.2")
	if err != nil {
		t.Fatal(err)
	}
	images := regexp.MustCompile(`(?m)^\s*image:\s*"?([^"\s]+)"?\s*$`).FindAllStringSubmatch(out, -1)
	if len(images) == 0 {
		t.Fatal("helm template: no image: lines")
	}
	for _, img := range images {
		if img[1] != values.Image.Repository+":"+want {
			t.Errorf("helm template: image %q, want %s:%s", img[1], values.Image.Repository, want)
		}
	}
}

// TestMakefileStampsTheConvention reads the commands make would run for a
// release tag: the binary reports the tag itself, the image is tagged
// without the "v", as the chart expects it.
func TestMakefileStampsTheConvention(t *testing.T) {
	makeCmd := func(target string) string {
		t.Helper()
		cmd := exec.Command("make", "-n", target, "VERSION=v1.2.3", "COMMIT=abc123")
		cmd.Dir = testenv.RepoRoot()
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make -n %s: %v\n%s", target, err, out)
		}
		return string(out)
	}
	if build := makeCmd("build"); !strings.Contains(build, "-X github.com/toolgate/toolgate/cli.Version=v1.2.3 ") {
		t.Errorf("make build does not stamp the tag v1.2.3 as the binary's version:\n%s", build)
	}
	image := makeCmd("image")
	if !strings.Contains(image, "-ref toolgate.local/toolgate:1.2.3 ") {
		t.Errorf("make image does not tag the image 1.2.3 for VERSION=v1.2.3:\n%s", image)
	}
	if !strings.Contains(image, "-version v1.2.3 ") {
		t.Errorf("make image does not stamp the tag v1.2.3 into the image's binary:\n%s", image)
	}
	// make release takes the tag itself (hack/release derives X.Y.Z for the
	// image, the chart and the packages, its tests check how) and names the
	// image in make image's repository.
	release := makeCmd("release")
	if !strings.Contains(release, "-version 'v1.2.3' -commit 'abc123' ") || !strings.Contains(release, "-image-repository 'toolgate.local/toolgate'") {
		t.Errorf("make release does not pass the tag v1.2.3, the commit and make image's repository to hack/release:\n%s", release)
	}
}

// TestDocsSetImageTagsWithoutV: the install commands the docs show set
// image.tag as the chart names images (X.Y.Z).
func TestDocsSetImageTagsWithoutV(t *testing.T) {
	pages, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	pages = append(pages, filepath.Join(testenv.RepoRoot(), "README.md"))
	set := regexp.MustCompile(`image\.tag=(\S+)`)
	for _, p := range pages {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range set.FindAllStringSubmatch(string(data), -1) {
			if !plain.MatchString(m[1]) {
				t.Errorf("%s: --set image.tag=%s: image tags are X.Y.Z", filepath.Base(p), m[1])
			}
		}
	}
}
