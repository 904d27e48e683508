package cli

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/engine/lint"
	"github.com/toolgate/toolgate/internal/exitcode"
	"github.com/toolgate/toolgate/manifest"
)

// ValidateOptions are the flags of `toolgate validate`.
type ValidateOptions struct {
	sourceFlags
	// StrictKinds refuses objects of other API groups (a Deployment) as
	// problems, instead of skipping and counting them.
	StrictKinds bool
	// Output is -o: text (the default, the lines below), json or yaml
	// (a validateReport).
	Output outputFormat
}

func newValidateCommand() *cobra.Command {
	o := &ValidateOptions{}
	cmd := &cobra.Command{
		Use:   "validate -f PATH...",
		Short: "Report everything the API server or the webhook would reject",
		Long: "validate reads Policy and FrozenAgent manifests and prints, one per line on stdout, every\n" +
			"problem the API server would reject them for: its checks of the CRD schema and CEL rules\n" +
			"(run from the generated CRDs), then, for a Policy that passes them, toolgate's admission webhook:\n" +
			"  FILE:doc N: Kind/name: FIELD: message\n" +
			"The webhook's warnings (valid, but probably not what was meant) go to stderr, as kubectl shows them:\n" +
			"  warning: FILE:doc N: Policy/name: FIELD: message\n" +
			"Objects of other API groups (Deployment, ConfigMap, ...) are skipped and counted on stderr, so\n" +
			"`kustomize build | toolgate validate -f -` checks an application's toolgate objects; --strict-kinds\n" +
			"refuses them instead. -o json|yaml prints the objects checked and the problems found, located.\n" +
			"It exits 1 if there is any problem, 0 if there is none and 2 if a path cannot be read.",
		Example: "  toolgate validate -f config/samples\n" +
			"  kustomize build overlays/prod | toolgate validate -f - -o json",
		RunE: func(cmd *cobra.Command, args []string) error {
			o.addArgs(args)
			return runValidate(cmd, o, streamsOf(cmd))
		},
	}
	o.register(cmd, false)
	cmd.Flags().BoolVar(&o.StrictKinds, "strict-kinds", false, "refuse objects of kinds toolgate does not read (Deployment, ...) instead of skipping them")
	registerOutput(cmd, &o.Output)
	return cmd
}

func runValidate(cmd *cobra.Command, o *ValidateOptions, s streams) error {
	if err := o.check(cmd); err != nil {
		return err
	}
	set, err := manifest.LoadWith(o.Paths, s.in, manifest.Options{SkipOtherKinds: !o.StrictKinds})
	var problems manifest.Errors
	if err != nil {
		var loadErrs manifest.Errors
		if !errors.As(err, &loadErrs) || loadErrs.Unreadable() {
			return &exitcode.Error{Code: exitcode.Usage, Err: err}
		}
		problems = loadErrs
	}
	if n := len(set.Skipped); n > 0 {
		fmt.Fprintf(s.err, "note: skipped %d file(s) with no apiVersion, kind, metadata or spec, such as %s\n", n, set.Skipped[0])
	}
	if len(set.OtherKinds) > 0 {
		n := 0
		for _, c := range set.OtherKinds {
			n += c
		}
		fmt.Fprintf(s.err, "skipped %d objects of other kinds: %s\n", n, strings.Join(slices.Sorted(maps.Keys(set.OtherKinds)), ", "))
	}
	// Only objects the API server's schema accepted are in set: like the
	// API server, which never calls the webhook for the others.
	var warnings manifest.Errors
	for i := range set.Policies {
		bad, lint := checkPolicy(&set.Policies[i])
		problems = append(problems, bad...)
		warnings = append(warnings, lint...)
	}
	for i := range set.ClusterPolicies {
		bad, lint := checkClusterPolicy(&set.ClusterPolicies[i])
		problems = append(problems, bad...)
		warnings = append(warnings, lint...)
	}
	slices.SortStableFunc(problems, func(a, b *manifest.Error) int {
		return cmp.Or(cmp.Compare(a.Source.File, b.Source.File), cmp.Compare(a.Source.Doc, b.Source.Doc),
			cmp.Compare(a.Source.Item, b.Source.Item))
	})
	if o.Output != outputText {
		if err := writeStructured(s.out, o.Output, newValidateReport(set, problems, warnings)); err != nil {
			return err
		}
	} else {
		for _, w := range warnings {
			fmt.Fprintln(s.err, "warning: "+w.Error())
		}
		for _, p := range problems {
			fmt.Fprintln(s.out, p.Error())
		}
	}
	if len(problems) > 0 {
		fmt.Fprintf(s.err, "%d problem(s) in %s\n", len(problems), objectCount(set))
		return &exitcode.Error{Code: exitcode.Problems}
	}
	fmt.Fprintf(s.err, "%s valid\n", objectCount(set))
	return nil
}

// objectCount counts the objects read, those the schema rejected included.
func objectCount(set *manifest.Set) string {
	out := fmt.Sprintf("%d Policy and %d FrozenAgent object(s)",
		len(set.Policies)+set.Rejected["Policy"], len(set.FrozenAgents)+set.Rejected["FrozenAgent"])
	var more []string
	for _, k := range []struct {
		kind string
		n    int
	}{{"ClusterPolicy", len(set.ClusterPolicies)}, {"ClusterFrozenAgent", len(set.ClusterFrozenAgents)}, {"PolicyException", len(set.Exceptions)}} {
		if n := k.n + set.Rejected[k.kind]; n > 0 {
			more = append(more, fmt.Sprintf("%d %s", n, k.kind))
		}
	}
	if len(more) > 0 {
		out += " (and " + strings.Join(more, ", ") + ")"
	}
	return out
}

// checkPolicy is what the webhook checks once the schema passed:
// lint.Review: the engine's compile step, nothing re-written, and, for a
// Policy it accepts, the engine's lint, which the webhook returns as
// warnings. FrozenAgents have no webhook (the kill switch must work while
// webhooks are down), so the schema is all there is to them.
func checkPolicy(p *manifest.Policy) (problems, warnings manifest.Errors) {
	return review(p.Source, "Policy", p.Object.Name, bundle.Policy(&p.Object), nil)
}

// checkClusterPolicy is checkPolicy for a ClusterPolicy, whose
// namespaceSelector must also parse (the API server does not check a
// selector's operators; the webhook does).
func checkClusterPolicy(p *manifest.ClusterPolicy) (problems, warnings manifest.Errors) {
	return review(p.Source, "ClusterPolicy", p.Object.Name, bundle.ClusterPolicy(&p.Object), bundle.SelectorError(p.Object.Spec.NamespaceSelector))
}

// review is lint.Review of pol, its findings located at src; selector is
// why a ClusterPolicy's namespaceSelector does not parse, or nil.
func review(src manifest.Source, kind, name string, pol engine.Policy, selector error) (problems, warnings manifest.Errors) {
	at := func(field, msg string) *manifest.Error {
		return &manifest.Error{Source: src, Kind: kind, Name: name, Field: field, Message: msg}
	}
	bad, found := lint.Review(pol)
	for _, d := range bad {
		problems = append(problems, at(d.Field, d.Message))
	}
	if selector != nil {
		problems = append(problems, at("spec.namespaceSelector", selector.Error()))
	}
	for _, d := range found {
		warnings = append(warnings, at(d.Field, d.Message))
	}
	return problems, warnings
}
