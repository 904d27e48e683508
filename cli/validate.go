package cli

import (
	"cmp"
	"errors"
	"fmt"
	"slices"

	"github.com/spf13/cobra"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/manifest"
)

// ValidateOptions are the flags of `toolgate validate`.
type ValidateOptions struct {
	sourceFlags
}

func newValidateCommand() *cobra.Command {
	o := &ValidateOptions{}
	cmd := &cobra.Command{
		Use:   "validate -f PATH...",
		Short: "Report everything the API server or the webhook would reject",
		Long: "validate reads Policy and FrozenAgent manifests and prints, one per line on stdout, every\n" +
			"problem the API server's schema or toolgate's admission webhook would reject them for:\n" +
			"  FILE:doc N: Kind/name: FIELD: message\n" +
			"It exits 1 if there is any problem, 0 if there is none and 2 if a path cannot be read.",
		Example: "  toolgate validate -f config/samples",
		RunE: func(cmd *cobra.Command, args []string) error {
			o.addArgs(args)
			return runValidate(cmd, o, streamsOf(cmd))
		},
	}
	o.register(cmd, false)
	return cmd
}

func runValidate(cmd *cobra.Command, o *ValidateOptions, s streams) error {
	if err := o.check(cmd); err != nil {
		return err
	}
	set, err := manifest.Load(o.Paths, s.in)
	var problems manifest.Errors
	if err != nil {
		var loadErrs manifest.Errors
		if !errors.As(err, &loadErrs) || loadErrs.Unreadable() {
			return &ExitError{Code: ExitUsage, Err: err}
		}
		problems = loadErrs
	}
	if n := len(set.Skipped); n > 0 {
		fmt.Fprintf(s.err, "note: skipped %d file(s) with no apiVersion, kind, metadata or spec, such as %s\n", n, set.Skipped[0])
	}
	for i := range set.Policies {
		problems = append(problems, checkPolicy(&set.Policies[i])...)
	}
	for i := range set.FrozenAgents {
		problems = append(problems, checkFrozenAgent(&set.FrozenAgents[i])...)
	}
	slices.SortStableFunc(problems, func(a, b *manifest.Error) int {
		return cmp.Or(cmp.Compare(a.Source.File, b.Source.File), cmp.Compare(a.Source.Doc, b.Source.Doc),
			cmp.Compare(a.Source.Item, b.Source.Item))
	})
	for _, p := range problems {
		fmt.Fprintln(s.out, p.Error())
	}
	if len(problems) > 0 {
		fmt.Fprintf(s.err, "%d problem(s) in %s\n", len(problems), objectCount(set))
		return &ExitError{Code: ExitProblems}
	}
	fmt.Fprintf(s.err, "%s valid\n", objectCount(set))
	return nil
}

func objectCount(set *manifest.Set) string {
	return fmt.Sprintf("%d Policy and %d FrozenAgent object(s)", len(set.Policies), len(set.FrozenAgents))
}

// checkPolicy is what the API server checks of the metadata plus what the
// webhook checks of the spec: the engine's compile step, nothing re-written.
func checkPolicy(p *manifest.Policy) manifest.Errors {
	at := located(p.Source, "Policy", p.Object.Name)
	out, nameReported := checkMeta(at, &p.Object.ObjectMeta)
	for _, d := range engine.CheckPolicy(bundle.Policy(&p.Object)) {
		if d.Field == "metadata.name" && nameReported {
			continue
		}
		out = append(out, at(d.Field, d.Message))
	}
	return out
}

func checkFrozenAgent(f *manifest.FrozenAgent) manifest.Errors {
	at := located(f.Source, "FrozenAgent", f.Object.Name)
	out, _ := checkMeta(at, &f.Object.ObjectMeta)
	for _, d := range engine.CheckFrozenAgent(bundle.FrozenAgent(&f.Object)) {
		out = append(out, at(d.Field, d.Message))
	}
	return out
}

// checkMeta validates metadata as the API server does for a namespaced
// custom resource; a manifest naming no namespace is checked as if applied to
// "default".
func checkMeta(at func(field, msg string) *manifest.Error, meta *metav1.ObjectMeta) (out manifest.Errors, nameReported bool) {
	m := *meta
	if m.Namespace == "" {
		m.Namespace = metav1.NamespaceDefault
	}
	for _, e := range apivalidation.ValidateObjectMeta(&m, true, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata")) {
		out = append(out, at(e.Field, e.ErrorBody()))
		nameReported = nameReported || e.Field == "metadata.name"
	}
	return out, nameReported
}

func located(src manifest.Source, kind, name string) func(field, msg string) *manifest.Error {
	return func(field, msg string) *manifest.Error {
		return &manifest.Error{Source: src, Kind: kind, Name: name, Field: field, Message: msg}
	}
}
