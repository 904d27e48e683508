// Package testenv is what the test suites share: the real control plane
// (kube-apiserver and etcd) for envtest suites, helm, and the helpers more
// than one package needs (waits, namespaces, bundles, kubeconfigs, RBAC,
// tars). It never skips: a suite that cannot get its binaries fails.
package testenv

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// RepoRoot is the repository's top directory.
func RepoRoot() string {
	_, file, _, _ := goruntime.Caller(0)
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

// Start starts a control plane with toolgate's CRDs installed. Stop it with
// env.Stop.
func Start() (*envtest.Environment, *rest.Config, error) {
	assets, err := BinaryAssetsDir()
	if err != nil {
		return nil, nil, err
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{CRDDir()},
		ErrorIfCRDPathMissing: true,
		Scheme:                Scheme(),
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", assets, err)
	}
	return env, cfg, nil
}

// FreeLoopbackAddr is a loopback host:port nobody listened on a moment
// ago: for processes that must be given their address up front.
func FreeLoopbackAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// WriteTree writes files (slash-separated relative path -> content) under a
// new temporary directory and returns it.
func WriteTree(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
