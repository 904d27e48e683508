package freeze

import (
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/internal/kubeconn"
)

// connection is how the commands reach the cluster (internal/kubeconn).
type connection struct{ flags kubeconn.Flags }

func (c *connection) addFlags(cmd *cobra.Command) {
	c.flags.Add(cmd, "the agent's namespace")
}

func (c *connection) client() (client.WithWatch, string, error) {
	// Namespaces: which ClusterFrozenAgents select the one unfrozen.
	return c.flags.Client(v1alpha1.AddToScheme, corev1.AddToScheme)
}
