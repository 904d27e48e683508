// Package cli is the toolgate command line: offline evaluation, validation
// and bundle building from manifest files, with the same bundle builder and
// engine the cluster runs.
package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/exitcode"
)

// NewRootCommand returns the toolgate command with the offline subcommands
// and any extra ones (the manager and the sidecar live in their own
// packages).
func NewRootCommand(extra ...*cobra.Command) *cobra.Command {
	root := &cobra.Command{
		Use:   "toolgate",
		Short: "Governance for AI agents' tool calls",
		Long: "toolgate decides whether an AI agent's tool call may run, from Policy and FrozenAgent\n" +
			"resources. eval, validate and bundle work on manifests offline, exactly as the cluster will;\n" +
			"freeze and unfreeze pull the kill switch on a live cluster; approve, deny and approvals\n" +
			"decide the calls ask rules hold for a person.",
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
				if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
					msg += "; did you mean " + strings.Join(s, " or ") + "?"
				}
				return exitcode.Usagef("%s", msg)
			}
			return cmd.Help()
		},
	}
	root.SuggestionsMinimumDistance = 2
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return exitcode.Usagef("%s: %v (see %s --help)", c.CommandPath(), err, c.CommandPath())
	})
	root.AddCommand(newEvalCommand(), newValidateCommand(), newBundleCommand(), newVersionCommand(), newHookCommand(), newExportCommand(), newMCPCommand(), newTestCommand(), newReplayCommand())
	root.AddCommand(extra...)
	return root
}

// Execute runs root, prints the error it ends with (if any) to root's error
// stream and returns the process exit code.
func Execute(root *cobra.Command) int {
	err := root.Execute()
	var ee *exitcode.Error
	if err != nil && (!errors.As(err, &ee) || ee.Err != nil) {
		fmt.Fprintln(root.ErrOrStderr(), err)
	}
	return exitcode.Of(err)
}
