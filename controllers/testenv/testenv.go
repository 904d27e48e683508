// Package testenv starts the real control plane (kube-apiserver and etcd) that
// toolgate's operator tests and measurements run on, with the CRDs installed.
// It never falls back to a fake: if the binaries cannot be found or built,
// Start fails.
package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// Start starts a control plane. Stop it with env.Stop.
func Start() (*envtest.Environment, *rest.Config, error) {
	root, err := RepoRoot()
	if err != nil {
		return nil, nil, err
	}
	assets, err := Assets(root)
	if err != nil {
		return nil, nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                Scheme(),
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err)
	}
	return env, cfg, nil
}

// Scheme knows the built-in kinds and toolgate's.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// Assets is the directory holding kube-apiserver and etcd: KUBEBUILDER_ASSETS
// when set, otherwise what hack/setup-envtest.sh builds (once, cached).
func Assets(root string) (string, error) {
	dir := os.Getenv("KUBEBUILDER_ASSETS")
	if dir == "" {
		var stdout bytes.Buffer
		cmd := exec.Command(filepath.Join(root, "hack", "setup-envtest.sh"))
		cmd.Dir, cmd.Stdout, cmd.Stderr = root, &stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("KUBEBUILDER_ASSETS is not set and hack/setup-envtest.sh failed: %w", err)
		}
		lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
		dir = strings.TrimSpace(lines[len(lines)-1])
	}
	for _, bin := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, bin)); err != nil {
			return "", fmt.Errorf("no %s in %q (KUBEBUILDER_ASSETS or hack/setup-envtest.sh): %w", bin, dir, err)
		}
	}
	return dir, nil
}

// RepoRoot walks up from the working directory to the module root, so tests
// (run from their package directory) and `go run` (run from anywhere in the
// tree) find the CRDs and the build script.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.Contains(data, []byte("module github.com/toolgate/toolgate\n")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the toolgate module: run from the repository")
		}
		dir = parent
	}
}
