package testenv

import (
	"fmt"
	"io"
	"os"
	"testing"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

// Suite is the control plane a test package shares: envtest, its config
// (not throttled: the tests' own writes must not wait) and a client.
type Suite struct {
	Env    *envtest.Environment
	Config *rest.Config
	Client client.Client
}

// Main is a test package's TestMain body: it starts the control plane,
// gives it to keep (which stores what the tests need), runs the tests and
// stops it, and returns the exit code for os.Exit.
func Main(m *testing.M, keep func(Suite)) int {
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	env, cfg, err := Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "envtest:", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping envtest:", err)
		}
	}()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		fmt.Fprintln(os.Stderr, "client:", err)
		return 1
	}
	keep(Suite{Env: env, Config: cfg, Client: c})
	return m.Run()
}
