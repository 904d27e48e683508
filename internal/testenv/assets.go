// Package testenv finds the real control plane (kube-apiserver and etcd) for
// envtest suites. It never skips: a suite that cannot get its binaries fails.
package testenv

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// BinaryAssetsDir returns $KUBEBUILDER_ASSETS when set, else builds (once,
// cached under bin/k8s/) the binaries with hack/setup-envtest.sh and returns
// the directory it prints last.
func BinaryAssetsDir() (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		return dir, nil
	}
	cmd := exec.Command(filepath.Join(RepoRoot(), "hack", "setup-envtest.sh"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building the envtest control plane with hack/setup-envtest.sh: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	dir := lines[len(lines)-1]
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return "", fmt.Errorf("hack/setup-envtest.sh printed %q but %s is not there: %w", dir, bin, err)
		}
	}
	return dir, nil
}

// CRDDir holds the generated CustomResourceDefinitions.
func CRDDir() string { return filepath.Join(RepoRoot(), "config", "crd", "bases") }

// WebhookDir holds the generated webhook configurations.
func WebhookDir() string { return filepath.Join(RepoRoot(), "config", "webhook") }
