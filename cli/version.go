package cli

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/exitcode"
)

// Version and Commit are stamped at build time (make build, make image):
//
//	go build -ldflags "-X github.com/toolgate/toolgate/cli.Version=v0.1.0 -X github.com/toolgate/toolgate/cli.Commit=$(git rev-parse HEAD)"
//
// A build without the stamp (go install, plain go build) leaves them "dev",
// and `toolgate version` reads what the Go toolchain recorded instead.
var (
	Version = "dev"
	Commit  = "dev"
)

// unstamped is the value of Version and Commit when no -ldflags set them.
const unstamped = "dev"

// buildVersion is what `toolgate version` reports.
type buildVersion struct {
	version, commit, commitTime string
}

// resolveVersion prefers the ldflags stamp; for what is not stamped it falls
// back to the build info the Go toolchain embeds: the module version
// (v1.2.3 from `go install ...@v1.2.3`, a pseudo-version from a checkout) and
// the VCS revision, commit time and modified flag (-buildvcs, on by default
// in a git checkout). A modified tree gets "-dirty", as `git describe
// --dirty` does for the stamp, so a binary never passes for a commit it was
// not built from. info is nil when the binary carries no build info.
func resolveVersion(version, commit string, info *debug.BuildInfo) buildVersion {
	v := buildVersion{version: version, commit: commit}
	if info == nil {
		return v
	}
	if v.version == unstamped && info.Main.Version != "" && info.Main.Version != "(devel)" {
		v.version = info.Main.Version
	}
	if v.commit != unstamped {
		return v
	}
	var revision, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			revision = s.Value
		case "vcs.time":
			v.commitTime = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if revision == "" {
		v.commitTime = ""
		return v
	}
	v.commit = revision
	if modified == "true" {
		v.commit += "-dirty"
	}
	return v
}

func (v buildVersion) String() string {
	commit := "commit " + v.commit
	if v.commitTime != "" {
		commit += ", committed " + v.commitTime
	}
	return fmt.Sprintf("toolgate %s (%s, %s, %s/%s)", v.version, commit, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}

// BuildVersion is the version `toolgate version` reports: the stamp, else
// the module version the Go toolchain recorded, else "dev". The sidecar
// reports it in its Lease.
func BuildVersion() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		info = nil
	}
	return resolveVersion(Version, Commit, info).version
}

// versionInfo is what `toolgate version -o json|yaml` prints.
type versionInfo struct {
	Version    string `json:"version"`
	Commit     string `json:"commit"`
	CommitTime string `json:"commitTime,omitempty"`
	GoVersion  string `json:"goVersion"`
	Platform   string `json:"platform"`
}

func newVersionCommand() *cobra.Command {
	var output outputFormat
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the toolgate version",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			info, ok := debug.ReadBuildInfo()
			if !ok {
				info = nil
			}
			bv := resolveVersion(Version, Commit, info)
			if output != outputText {
				return writeStructured(cmd.OutOrStdout(), output, versionInfo{Version: bv.version, Commit: bv.commit, CommitTime: bv.commitTime,
					GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH})
			}
			_, err := fmt.Fprintln(cmd.OutOrStdout(), bv)
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
