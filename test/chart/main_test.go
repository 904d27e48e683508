// Package chart tests the install manifests: the Helm chart in
// charts/toolgate and the kustomize tree in config/. Objects are checked by a
// real API server (envtest) with server-side dry-run, and RBAC by
// SubjectAccessReviews and impersonated writes against the installed roles.
package chart

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/toolgate/toolgate/internal/testenv"
)

// One control plane and one helm binary for the whole package.
var (
	helm testenv.Helm
	cfg  *rest.Config
	k8s  client.Client
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	if helm, err = testenv.InstallHelm(); err != nil {
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
