package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ChartDir holds the Helm chart.
func ChartDir() string { return filepath.Join(RepoRoot(), "charts", "toolgate") }

// Helm runs the helm binary Bin with Env added to the process's
// environment (a kubeconfig, helm's own directories).
type Helm struct {
	Bin string
	Env []string
}

// InstallHelm builds helm once with hack/install-helm.sh (cached in bin/,
// the version pinned there) and returns the binary it prints last.
func InstallHelm() (Helm, error) {
	cmd := exec.Command(filepath.Join(RepoRoot(), "hack", "install-helm.sh"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return Helm{}, fmt.Errorf("building helm with hack/install-helm.sh: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	bin := lines[len(lines)-1]
	if _, err := os.Stat(bin); err != nil {
		return Helm{}, fmt.Errorf("hack/install-helm.sh printed %q: %w", bin, err)
	}
	return Helm{Bin: bin}, nil
}

// Package packages the chart at chartDir into dest as a release ships it,
// version and appVersion both version (X.Y.Z: the chart's default image tag
// is its appVersion), and returns the .tgz's path. `make release` and the
// real-node suite, which installs what a release ships, both package with it.
func (h Helm) Package(chartDir, version, dest string) (string, error) {
	out, err := h.Run("package", chartDir, "--version", version, "--app-version", version, "--destination", dest)
	if err != nil {
		return "", err
	}
	// helm: "Successfully packaged chart and saved it to: <path>"
	_, path, ok := strings.Cut(strings.TrimSpace(out), "saved it to: ")
	if !ok {
		return "", fmt.Errorf("helm package: no path in its output %q", out)
	}
	return path, nil
}

// Run runs helm with args and returns its standard output, or an error
// carrying the command line and both outputs.
func (h Helm) Run(args ...string) (string, error) {
	cmd := exec.Command(h.Bin, args...)
	cmd.Env = append(os.Environ(), h.Env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return stdout.String(), nil
}
