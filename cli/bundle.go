package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
)

// BundleOptions are the flags of `toolgate bundle`.
type BundleOptions struct {
	sourceFlags
	// Now decides which freezes have expired; empty means the real clock.
	Now string
}

func newBundleCommand() *cobra.Command {
	o := &BundleOptions{}
	cmd := &cobra.Command{
		Use:   "bundle -f PATH... [-n NAMESPACE]",
		Short: "Print the bundle the operator would publish for these manifests",
		Long: "bundle prints the exact bundle document (the bundle.json the operator publishes for the\n" +
			"namespace) built from the manifests by the operator's own function, byte for byte, with no\n" +
			"trailing newline. A sidecar can serve it with --bundle-file. Compile diagnostics go to stderr.",
		Example: "  toolgate bundle -f config/samples -n agents > bundle.json",
		RunE: func(cmd *cobra.Command, args []string) error {
			o.addArgs(args)
			return runBundle(cmd, o, streamsOf(cmd))
		},
	}
	o.register(cmd, true)
	cmd.Flags().StringVar(&o.Now, "now", "", "leave out freezes expired at this RFC 3339 time instead of now")
	return cmd
}

func runBundle(cmd *cobra.Command, o *BundleOptions, s streams) error {
	if err := o.check(cmd); err != nil {
		return err
	}
	now, err := parseNow(o.Now)
	if err != nil {
		return err
	}
	set, err := loadNamespace(&o.sourceFlags, s.in)
	if err != nil {
		return err
	}
	b := bundle.Build(set.PolicyObjects(), set.FrozenAgentObjects(), now)
	_, diags := engine.Compile(b)
	printDiagnostics(s.err, set, diags)
	doc, _, err := engine.Encode(b)
	if err != nil {
		return fmt.Errorf("encoding the bundle: %w", err)
	}
	_, err = s.out.Write(doc)
	return err
}
