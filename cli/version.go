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

// versionInfo is what `toolgate version -o json|yaml` prints.
type versionInfo struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
}

func newVersionCommand() *cobra.Command {
	var output outputFormat
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the toolgate version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := versionInfo{Version: Version, Commit: Commit, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
			if output != outputText {
				return writeStructured(cmd.OutOrStdout(), output, v)
			}
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "toolgate %s (commit %s, %s, %s)\n", v.Version, v.Commit, v.GoVersion, v.Platform)
			return err
		},
	}
	registerOutput(cmd, &output)
	return cmd
}

// noArgs rejects positional arguments as a usage error.
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return exitcode.Usagef("%s takes no arguments, got %q", cmd.CommandPath(), args)
	}
	return nil
}
