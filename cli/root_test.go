package cli

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/exitcode"
)

func TestVersionDefaultsToDev(t *testing.T) {
	o := run(t, "", "version")
	want := fmt.Sprintf("toolgate dev (commit dev, %s, %s/%s)\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	if o.code != 0 || o.stdout != want {
		t.Errorf("exit %d, stdout %q, want %q", o.code, o.stdout, want)
	}
	if o := run(t, "", "version", "extra"); o.code != exitcode.Usage || !strings.Contains(o.stderr, "toolgate version takes no arguments") {
		t.Errorf("version extra: exit %d, stderr %q", o.code, o.stderr)
	}
}

func TestRootUsage(t *testing.T) {
	if o := run(t, ""); o.code != 0 || !strings.Contains(o.stdout, "eval") || !strings.Contains(o.stdout, "validate") {
		t.Errorf("no arguments prints help: exit %d, stdout %q", o.code, o.stdout)
	}
	o := run(t, "", "evla")
	if o.code != exitcode.Usage || !strings.Contains(o.stderr, `unknown command "evla" for "toolgate"; did you mean eval?`) {
		t.Errorf("unknown command: exit %d, stderr %q", o.code, o.stderr)
	}
	if o := run(t, "", "--bogus"); o.code != exitcode.Usage || !strings.Contains(o.stderr, "unknown flag: --bogus") {
		t.Errorf("unknown root flag: exit %d, stderr %q", o.code, o.stderr)
	}
}

func TestExtraSubcommands(t *testing.T) {
	ran := false
	extra := &cobra.Command{Use: "sidecar", RunE: func(*cobra.Command, []string) error { ran = true; return errors.New("boom") }}
	root := NewRootCommand(extra)
	var out, errb strings.Builder
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs([]string{"sidecar"})
	if code := Execute(root); code != 1 || !ran || errb.String() != "boom\n" {
		t.Errorf("exit %d, ran %v, stderr %q: a plain error from a subcommand is exit 1, printed once", code, ran, errb.String())
	}
}
