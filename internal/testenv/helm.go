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
