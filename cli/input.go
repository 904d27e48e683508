package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/exitcode"
	"github.com/toolgate/toolgate/manifest"
)

// streams are where a command reads and writes; tests run commands in
// process with buffers.
type streams struct {
	in       io.Reader
	out, err io.Writer
}

func streamsOf(cmd *cobra.Command) streams {
	return streams{in: cmd.InOrStdin(), out: cmd.OutOrStdout(), err: cmd.ErrOrStderr()}
}

// sourceFlags are the flags of every command that reads manifests.
type sourceFlags struct {
	// Paths are files, directories (read recursively) or "-" for stdin.
	Paths []string
	// Namespace keeps only objects in it (objects naming no namespace count
	// as in it). Empty: the one namespace the objects name, if any.
	Namespace string
	// NamespaceLabels are the namespace's labels, as KEY=VALUE,...: what
	// ClusterPolicies' and ClusterFrozenAgents' namespaceSelectors see.
	NamespaceLabels string
	labels          map[string]string
}

func (f *sourceFlags) register(cmd *cobra.Command, withNamespace bool) {
	cmd.Flags().StringArrayVarP(&f.Paths, "filename", "f", nil,
		"manifest file or directory (recursive: .yaml, .yml, .json), or - for stdin; repeatable")
	if withNamespace {
		cmd.Flags().StringVarP(&f.Namespace, "namespace", "n", "",
			"namespace to evaluate: keep objects in it and objects naming no namespace")
		cmd.Flags().StringVar(&f.NamespaceLabels, "namespace-labels", "",
			"the namespace's labels, KEY=VALUE,...: what ClusterPolicy and ClusterFrozenAgent namespaceSelectors see (default: none)")
	}
}

// addArgs takes positional arguments as more paths, so a shell glob after -f
// (`-f samples/*.yaml`) means what it looks like.
func (f *sourceFlags) addArgs(args []string) {
	f.Paths = append(f.Paths, args...)
}

func (f *sourceFlags) check(cmd *cobra.Command) error {
	if len(f.Paths) == 0 {
		return exitcode.Usagef("%s: -f PATH is required (a manifest file or directory)", cmd.CommandPath())
	}
	if f.Namespace != "" {
		if errs := validation.IsDNS1123Label(f.Namespace); len(errs) > 0 {
			return exitcode.Usagef("%s: -n %q is not a namespace name: %s", cmd.CommandPath(), f.Namespace, strings.Join(errs, "; "))
		}
	}
	if f.NamespaceLabels != "" {
		set, err := labels.ConvertSelectorToLabelsMap(f.NamespaceLabels)
		if err == nil {
			err = metav1validation.ValidateLabels(set, field.NewPath("labels")).ToAggregate()
		}
		if err != nil {
			return exitcode.Usagef("%s: --namespace-labels %q: %v (want KEY=VALUE,...)", cmd.CommandPath(), f.NamespaceLabels, err)
		}
		f.labels = set
	}
	return nil
}

// loadBundle builds the bundle of the manifests' namespace at now
// (manifest.LoadBundle: a bundle is per namespace). Every input problem is
// a usage error.
func loadBundle(f *sourceFlags, in io.Reader, now time.Time) (*manifest.Set, engine.Bundle, error) {
	set, b, err := manifest.LoadNamespaceBundle(f.Paths, in, f.Namespace, f.labels, now)
	if err != nil {
		return nil, engine.Bundle{}, &exitcode.Error{Code: exitcode.Usage, Err: err}
	}
	return set, b, nil
}

// readFlagFile reads the file a flag names, or stdin for "-"; errors name
// the flag and the file, as usage errors.
func readFlagFile(flag, path string, in io.Reader) (data []byte, name string, err error) {
	name = path
	if path == manifest.Stdin {
		name = "<stdin>"
		data, err = io.ReadAll(in)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, name, exitcode.Usagef("%s %s: cannot read: %v", flag, name, err)
	}
	return data, name, nil
}

// parseNow reads --now; empty means the real clock.
func parseNow(s string) (time.Time, error) {
	if s == "" {
		return time.Now(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, exitcode.Usagef("--now %q is not an RFC 3339 time (like 2030-01-31T17:00:00Z)", s)
	}
	return t, nil
}

// printDiagnostics writes compile diagnostics, each located at the file and
// document its policy came from.
func printDiagnostics(w io.Writer, set *manifest.Set, diags []engine.Diagnostic) {
	for _, d := range diags {
		kind := d.PolicyKind
		if kind == "" {
			kind = engine.KindPolicy
		}
		src, _ := set.PolicySource(kind, d.PolicyID)
		e := manifest.Error{Source: src, Kind: kind, Name: d.PolicyID, Field: d.Field, Message: d.Message}
		fmt.Fprintln(w, e.Error())
	}
}
