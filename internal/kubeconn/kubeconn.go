// Package kubeconn is how the CLI's cluster commands (freeze, unfreeze,
// approve, deny, approvals) reach the API server: kubectl's kubeconfig
// rules (--kubeconfig, then KUBECONFIG, then ~/.kube/config), its
// --context, and the context's namespace unless -n is given.
package kubeconn

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/internal/exitcode"
)

// Flags are the connection flags a command takes.
type Flags struct {
	Kubeconfig string
	Context    string
	Namespace  string
}

// Add registers --kubeconfig, --context and -n/--namespace on cmd;
// namespaceHelp says whose namespace -n names.
func (f *Flags) Add(cmd *cobra.Command, namespaceHelp string) {
	fs := cmd.Flags()
	fs.StringVar(&f.Kubeconfig, "kubeconfig", "", "kubeconfig file (default: KUBECONFIG, then ~/.kube/config)")
	fs.StringVar(&f.Context, "context", "", "kubeconfig context (default: the current one)")
	fs.StringVarP(&f.Namespace, "namespace", "n", "", namespaceHelp+" (default: the context's, else default)")
}

// CheckNamespace refuses an -n that is no namespace name before anything
// is loaded, as a usage error.
func (f *Flags) CheckNamespace() error {
	if f.Namespace == "" {
		return nil
	}
	if msgs := validation.IsDNS1123Label(f.Namespace); len(msgs) > 0 {
		return exitcode.Usagef("--namespace %q: %s", f.Namespace, msgs[0])
	}
	return nil
}

// Config loads the REST config and the namespace the command works in.
// Its errors are usage errors: without a cluster the command cannot run.
func (f *Flags) Config() (*rest.Config, string, error) {
	if err := f.CheckNamespace(); err != nil {
		return nil, "", err
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = f.Kubeconfig
	cfg := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules,
		&clientcmd.ConfigOverrides{CurrentContext: f.Context, Context: clientcmdapi.Context{Namespace: f.Namespace}})
	rest, err := cfg.ClientConfig()
	if err != nil {
		return nil, "", exitcode.Usagef("no cluster to talk to: %v", err)
	}
	ns, _, err := cfg.Namespace()
	if err != nil {
		return nil, "", exitcode.Usagef("reading the namespace from the kubeconfig: %v", err)
	}
	return rest, ns, nil
}

// Client is a client knowing the kinds that addToScheme add, and the
// namespace the command works in.
func (f *Flags) Client(addToScheme ...func(*runtime.Scheme) error) (client.WithWatch, string, error) {
	rest, ns, err := f.Config()
	if err != nil {
		return nil, "", err
	}
	s := runtime.NewScheme()
	for _, add := range addToScheme {
		if err := add(s); err != nil {
			return nil, "", err
		}
	}
	cl, err := client.NewWithWatch(rest, client.Options{Scheme: s})
	if err != nil {
		return nil, "", fmt.Errorf("connecting to %s: %w", rest.Host, err)
	}
	return cl, ns, nil
}
