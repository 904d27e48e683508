package freeze

import (
	"fmt"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// connection is how the commands reach the cluster: kubectl's kubeconfig
// rules (--kubeconfig, then KUBECONFIG, then ~/.kube/config), its
// --context, and the context's namespace unless -n is given.
type connection struct {
	kubeconfig string
	context    string
	namespace  string
}

func (c *connection) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig file (default: KUBECONFIG, then ~/.kube/config)")
	f.StringVar(&c.context, "context", "", "kubeconfig context (default: the current one)")
	f.StringVarP(&c.namespace, "namespace", "n", "", "the agent's namespace (default: the context's, else default)")
}

func (c *connection) client() (client.WithWatch, string, error) {
	if c.namespace != "" {
		if msgs := validation.IsDNS1123Label(c.namespace); len(msgs) > 0 {
			return nil, "", usage("--namespace %q: %s", c.namespace, msgs[0])
		}
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	cfg := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: c.context, Context: clientcmdapi.Context{Namespace: c.namespace}})
	rest, err := cfg.ClientConfig()
	if err != nil {
		return nil, "", usage("no cluster to talk to: %v", err)
	}
	ns, _, err := cfg.Namespace()
	if err != nil {
		return nil, "", usage("reading the namespace from the kubeconfig: %v", err)
	}
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		return nil, "", err
	}
	// Namespaces: which ClusterFrozenAgents select the one unfrozen.
	if err := corev1.AddToScheme(s); err != nil {
		return nil, "", err
	}
	cl, err := client.NewWithWatch(rest, client.Options{Scheme: s})
	if err != nil {
		return nil, "", fmt.Errorf("connecting to %s: %w", rest.Host, err)
	}
	return cl, ns, nil
}
