// Package chart tests the install manifests: the Helm chart in
// charts/toolgate and the kustomize tree in config/. Objects are checked by a
// real API server (envtest) with server-side dry-run, and RBAC by
// SubjectAccessReviews and impersonated writes against the installed roles.
package chart

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/toolgate/toolgate/internal/testenv"
)

// One control plane and one helm binary for the whole package.
var (
	helmBin string
	cfg     *rest.Config
	k8s     client.Client
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if helmBin, err = installHelm(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	assets, err := testenv.BinaryAssetsDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env := &envtest.Environment{
		BinaryAssetsDirectory: assets,
		// Ours, plus stand-ins for the Prometheus Operator and cert-manager
		// CRDs the optional objects need.
		CRDDirectoryPaths:     []string{testenv.CRDDir(), filepath.Join("testdata", "crds")},
		ErrorIfCRDPathMissing: true,
	}
	if cfg, err = env.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "starting envtest:", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}()
	if k8s, err = client.New(cfg, client.Options{}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

// installHelm builds helm once with hack/install-helm.sh (cached in bin/) and
// returns the path it prints last.
func installHelm() (string, error) {
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "install-helm.sh"))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building helm with hack/install-helm.sh: %w", err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	bin := lines[len(lines)-1]
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("hack/install-helm.sh printed %q: %w", bin, err)
	}
	return bin, nil
}
