package freeze

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
)

// NewUnfreezeCommand returns `toolgate unfreeze`.
func NewUnfreezeCommand() *cobra.Command {
	var conn connection
	var sa string
	var all bool
	var scope clusterScope
	cmd := &cobra.Command{
		Use:   "unfreeze [--all-namespaces [--selector LABELS]] AGENT_ID | --service-account NAME | --all",
		Short: "Delete every FrozenAgent that freezes an agent, a ServiceAccount, or every agent, in a namespace",
		Long: `Delete every FrozenAgent in the namespace whose agentId matches AGENT_ID (case-insensitively,
as the freeze itself matches), or, with --service-account, whose serviceAccount is NAME (exactly,
as sidecars match it), whatever their names: the agent is then decided by policies again. A
FrozenAgent naming both an agent and a ServiceAccount is deleted by either, and lifts both. --all
deletes the FrozenAgents that freeze every agent of the namespace (allAgents: true), and only those;
a freeze of every agent still stops the agent that AGENT_ID unfreezes, and the command says so.

With --all-namespaces it deletes the matching ClusterFrozenAgents instead (the cluster's kill
switch), whatever their selectors, or, with --selector, only those with that namespaceSelector.

Exit status: 0 deleted, 1 no FrozenAgent froze it, 2 the command could not run.`,
		Example: `  toolgate unfreeze billing-bot-7 -n agents
  toolgate unfreeze --service-account billing-bot -n agents
  toolgate unfreeze --all -n agents
  toolgate unfreeze --all-namespaces billing-bot-7`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := emptyServiceAccount(cmd, sa); err != nil {
				return err
			}
			if err := allAlone(all, args, sa); err != nil {
				return err
			}
			switch {
			case all:
				return nil
			case sa == "":
				return exactlyOneAgent(cmd, args)
			case len(args) > 0:
				return usage("give an agent id or --service-account, not both: a FrozenAgent naming both is lifted by either")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			agentID := ""
			if len(args) == 1 {
				agentID = args[0]
			}
			sel, err := scope.parse(cmd)
			if err != nil {
				return err
			}
			if scope.on {
				return runClusterUnfreeze(cmd.Context(), cmd.OutOrStdout(), &conn, agentID, sa, all, sel, cmd.Flags().Changed("selector"))
			}
			return runUnfreeze(cmd.Context(), cmd.OutOrStdout(), &conn, agentID, sa, all)
		},
	}
	conn.addFlags(cmd)
	cmd.Flags().StringVar(&sa, "service-account", "", "instead of AGENT_ID, lift every freeze of sidecars running as this ServiceAccount")
	cmd.Flags().BoolVar(&all, "all", false, "instead of AGENT_ID, delete the FrozenAgents that freeze every agent of the namespace (allAgents: true), and only those")
	scope.addFlags(cmd, "unfreeze")
	return cmd
}

// unfreezing is which freezes an unfreeze lifts, and how to name them:
// those of agentID, compared as evaluation compares them, or, when sa is
// set, of the ServiceAccount sa; or, with all, those that freeze every
// agent.
func unfreezing(agentID, sa string, all bool) (func(engine.FrozenAgent) bool, string) {
	switch {
	case all:
		return func(f engine.FrozenAgent) bool { return f.All }, engine.FrozenAgent{All: true}.Describe()
	case sa != "":
		return func(f engine.FrozenAgent) bool { return f.FreezesServiceAccount(sa) }, engine.FrozenAgent{ServiceAccount: sa}.Describe()
	}
	return func(f engine.FrozenAgent) bool { return engine.SameAgent(f.ID, agentID) }, fmt.Sprintf("%q", agentID)
}

// runUnfreeze deletes the FrozenAgents that freeze agentID, or, when sa is
// set, the ServiceAccount sa: compared as evaluation compares them; or,
// with all, those that freeze every agent.
func runUnfreeze(ctx context.Context, out io.Writer, conn *connection, agentID, sa string, all bool) error {
	if err := checkFreeze(agentID, sa, "", all); err != nil {
		return err
	}
	freezes, what := unfreezing(agentID, sa, all)
	c, ns, err := conn.client()
	if err != nil {
		return err
	}
	var list v1alpha1.FrozenAgentList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return notDone("listing FrozenAgents in %s: %v", ns, err)
	}
	deleted := 0
	var stillAll []string // freezes of every agent, which still stop the one lifted
	for i := range list.Items {
		fa := &list.Items[i]
		f := bundle.FrozenAgent(fa)
		if !freezes(f) {
			if f.All && !f.Expired(time.Now()) {
				stillAll = append(stillAll, fa.Name)
			}
			continue
		}
		if err := c.Delete(ctx, fa); err != nil && !apierrors.IsNotFound(err) {
			return notDone("deleting FrozenAgent %s/%s: %v", ns, fa.Name, err)
		}
		fmt.Fprintf(out, "frozenagent %s/%s deleted (it froze %s)\n", ns, fa.Name, f.Describe())
		deleted++
	}
	for _, name := range stillAll {
		fmt.Fprintf(out, "still frozen: FrozenAgent %s/%s freezes every agent of the namespace (toolgate unfreeze --all lifts it)\n", ns, name)
	}
	for _, cf := range clusterFreezesLeft(ctx, c, ns, freezes) {
		fmt.Fprintf(out, "still frozen: ClusterFrozenAgent %s freezes %s in %s (toolgate unfreeze --all-namespaces lifts it)\n",
			cf.Name, describeTarget(clusterTarget(cf)), where(cf.Spec.NamespaceSelector))
	}
	if deleted == 0 {
		return notDone("no FrozenAgent in %s freezes %s", ns, what)
	}
	return nil
}
