package cli

import (
	"fmt"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/exitcode"
)

// Version and Commit are stamped at build time:
//
//	go build -ldflags "-X github.com/toolgate/toolgate/cli.Version=v0.1.0 -X github.com/toolgate/toolgate/cli.Commit=$(git rev-parse HEAD)"
var (
	Version = "dev"
	Commit  = "dev"
)

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the toolgate version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "toolgate %s (commit %s, %s, %s/%s)\n",
				Version, Commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
			return err
		},
	}
}

// noArgs rejects positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return exitcode.Usagef("%s takes no arguments, got %q", cmd.CommandPath(), args)
	}
	return nil
}
