// Package localcluster runs toolgate for real on one machine: envtest's
// kube-apiserver and etcd (built from source, see hack/setup-envtest.sh), the
// CRDs and webhook configurations installed, and the toolgate binary started
// as separate processes. The end-to-end tests and `make demo` share it.
package localcluster

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/toolgate/toolgate/internal/testenv"
)

// Cluster is a running local control plane.
type Cluster struct {
	Env *envtest.Environment
	// Config is an admin client configuration; Client uses it and knows
	// toolgate's kinds.
	Config *rest.Config
	Client client.Client
	// Kubeconfig is a file for kubectl and the toolgate processes.
	Kubeconfig string
	// Dir holds the kubeconfig and process logs.
	Dir string
	// Webhook serving parameters the manager must use: envtest points the
	// installed webhook configurations at this address, with a CA matching
	// the certificate in WebhookCertDir.
	WebhookHost    string
	WebhookPort    int
	WebhookCertDir string

	procs []*Process
}

// Start brings up the control plane with toolgate's CRDs and webhook
// configurations installed.
func Start(dir string) (*Cluster, error) {
	assets, err := testenv.BinaryAssetsDir()
	if err != nil {
		return nil, err
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{testenv.CRDDir()},
		ErrorIfCRDPathMissing: true,
		BinaryAssetsDirectory: assets,
		WebhookInstallOptions: envtest.WebhookInstallOptions{Paths: []string{testenv.WebhookDir()}},
		// kube-apiserver's graceful shutdown waits on open watches; past
		// this it is killed, which is all a local cluster needs.
		ControlPlaneStopTimeout: 5 * time.Second,
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting the control plane: %w", err)
	}
	c := &Cluster{Env: env, Config: cfg, Dir: dir,
		WebhookHost: env.WebhookInstallOptions.LocalServingHost, WebhookPort: env.WebhookInstallOptions.LocalServingPort,
		WebhookCertDir: env.WebhookInstallOptions.LocalServingCertDir}
	if c.Client, err = client.New(cfg, client.Options{Scheme: testenv.Scheme()}); err != nil {
		c.Stop()
		return nil, err
	}
	c.Kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(c.Kubeconfig, env.KubeConfig, 0o600); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// SigningNamespace stands for the manager's namespace.
const SigningNamespace = "default"

// ManagerArgs are the flags that run `toolgate manager` against this
// cluster with its webhooks served where the API server expects them.
func (c *Cluster) ManagerArgs() []string {
	return []string{"manager", "--kubeconfig", c.Kubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0",
		"--webhook-cert-mode", "provided", "--webhook-cert-dir", c.WebhookCertDir,
		"--webhook-host", c.WebhookHost, "--webhook-port", fmt.Sprint(c.WebhookPort),
		// Its "own" namespace: the signing key Secret and the published
		// public keys (toolgate-signing-keys) live there.
		"--signing-namespace", SigningNamespace}
}

// Stop ends every process started here, then the control plane.
func (c *Cluster) Stop() {
	for i := len(c.procs) - 1; i >= 0; i-- {
		c.procs[i].Stop()
	}
	_ = c.Env.Stop()
}
