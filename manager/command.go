package manager

import (
	"context"
	"flag"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/toolgate/toolgate/internal/tracing"
)

// ServiceName is the service.name of its spans unless OTEL_SERVICE_NAME
// says otherwise (docs/observability.md).
const ServiceName = "toolgate-manager"

// NewCommand is `toolgate manager`.
func NewCommand() *cobra.Command {
	o := DefaultOptions()
	zapOpts := zap.Options{}
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Run the operator: publish each namespace's Policies and FrozenAgents as a bundle ConfigMap",
		Long: `Run the operator. It compiles each namespace's Policies and FrozenAgents into
one versioned bundle ConfigMap that sidecars load, and reports on every object
whether it is live (kubectl get policies,frozenagents).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			cmd.SilenceUsage = true // from here on, errors are not about usage
			ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return tracing.Run(ctx, ServiceName, func(ctx context.Context) error { return Run(ctx, o) })
		},
	}
	o.AddFlags(cmd.Flags())
	cmd.AddCommand(newSigningKeyCommand())
	zfs := flag.NewFlagSet("zap", flag.ContinueOnError)
	zapOpts.BindFlags(zfs)
	cmd.Flags().AddGoFlagSet(zfs)
	return cmd
}
