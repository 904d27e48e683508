package manager

import (
	"os"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/toolgate/toolgate/internal/testenv"
)

// One real control plane for the package's Run tests.
var (
	env        *envtest.Environment
	restCfg    *rest.Config
	k8s        client.Client
	kubeconfig []byte
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, func(s testenv.Suite) {
		env, restCfg, k8s, kubeconfig = s.Env, s.Config, s.Client, s.Env.KubeConfig
	}))
}
