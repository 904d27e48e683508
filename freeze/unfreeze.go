package freeze

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/engine"
)

// NewUnfreezeCommand returns `toolgate unfreeze`.
func NewUnfreezeCommand() *cobra.Command {
	var conn connection
	cmd := &cobra.Command{
		Use:   "unfreeze AGENT_ID",
		Short: "Delete every FrozenAgent that freezes an agent in a namespace",
		Long: `Delete every FrozenAgent in the namespace whose agentId matches AGENT_ID (case-insensitively,
as the freeze itself matches), whatever their names: the agent is then decided by policies again.

Exit status: 0 deleted, 1 no FrozenAgent froze it, 2 the command could not run.`,
		Example: `  toolgate unfreeze billing-bot-7 -n agents`,
		Args:    exactlyOneAgent,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runUnfreeze(cmd.Context(), cmd.OutOrStdout(), &conn, args[0])
		},
	}
	conn.addFlags(cmd)
	return cmd
}

func runUnfreeze(ctx context.Context, out io.Writer, conn *connection, agentID string) error {
	if err := checkFreeze(agentID, "", ""); err != nil {
		return err
	}
	c, ns, err := conn.client()
	if err != nil {
		return err
	}
	var list v1alpha1.FrozenAgentList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return notDone("listing FrozenAgents in %s: %v", ns, err)
	}
	deleted := 0
	for i := range list.Items {
		fa := &list.Items[i]
		if !engine.SameAgent(fa.Spec.AgentID, agentID) {
			continue
		}
		if err := c.Delete(ctx, fa); err != nil && !apierrors.IsNotFound(err) {
			return notDone("deleting FrozenAgent %s/%s: %v", ns, fa.Name, err)
		}
		fmt.Fprintf(out, "frozenagent %s/%s deleted\n", ns, fa.Name)
		deleted++
	}
	if deleted == 0 {
		return notDone("no FrozenAgent in %s freezes %q", ns, agentID)
	}
	return nil
}
