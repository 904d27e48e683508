package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strings"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/exitcode"
	"github.com/toolgate/toolgate/manifest"
)

// TestOptions are the flags of `toolgate test`.
type TestOptions struct {
	// JUnit is a file to write JUnit XML to.
	JUnit string
	// Coverage lists the rules no case matched.
	Coverage bool
}

func newTestCommand() *cobra.Command {
	o := &TestOptions{}
	cmd := &cobra.Command{
		Use:   "test PATH...",
		Short: "Run policy unit tests: requests and the decisions they must get, for CI",
		Long: "test reads Test files (apiVersion " + testAPIVersion + ", kind " + testKind + "): a PATH is a file, or a\n" +
			"directory searched for *" + testFileSuffix + ". Each file builds one namespace's bundle from its\n" +
			"manifests, as the operator would, at its clock (now), and decides each case's request as the\n" +
			"sidecar would (a request carrying output is a tool's result, judged by result rules only);\n" +
			"a case passes when every field it expects is in the result as given.\n" +
			"It prints one line per failing case, then N passed, M failed. Exit 0 when every case passes,\n" +
			"1 when one fails, 2 on input it cannot read (the file, document and field are named).",
		Example: "  toolgate test config/samples\n" +
			"  toolgate test policies/ --junit report.xml --coverage",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return exitcode.Usagef("%s: name a test file or a directory of *%s files", cmd.CommandPath(), testFileSuffix)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTests(cmd, o, args, streamsOf(cmd))
		},
	}
	cmd.Flags().StringVar(&o.JUnit, "junit", "", "also write the results as JUnit XML to this file")
	cmd.Flags().BoolVar(&o.Coverage, "coverage", false, "list the rules of each file's bundle that no case matched")
	return cmd
}

// caseOutcome is one case run: the fields that differ, none when it passed.
type caseOutcome struct {
	name  string
	diffs []string
}

// fileOutcome is one test file run.
type fileOutcome struct {
	path, name string
	cases      []caseOutcome
	// unmatched are the bundle's rules no case matched, policy/rule.
	unmatched []string
}

func runTests(cmd *cobra.Command, o *TestOptions, paths []string, s streams) error {
	files, err := findTestFiles(paths)
	if err != nil {
		return asUsage(cmd, err)
	}
	var outcomes []fileOutcome
	for _, path := range files {
		t, err := readTestFile(path)
		if err != nil {
			return asUsage(cmd, err)
		}
		out, err := t.run(s.err)
		if err != nil {
			return asUsage(cmd, err)
		}
		outcomes = append(outcomes, out)
	}
	passed, failed := 0, 0
	for _, f := range outcomes {
		for _, c := range f.cases {
			if len(c.diffs) == 0 {
				passed++
				continue
			}
			failed++
			fmt.Fprintf(s.out, "%s: %q: %s\n", f.path, c.name, strings.Join(c.diffs, "; "))
		}
		if o.Coverage {
			for _, r := range f.unmatched {
				fmt.Fprintf(s.out, "%s: rule %s: no case matched it\n", f.path, r)
			}
		}
	}
	fmt.Fprintf(s.out, "%d passed, %d failed\n", passed, failed)
	if o.JUnit != "" {
		if err := writeJUnit(o.JUnit, outcomes); err != nil {
			return exitcode.Usagef("%s: --junit %s: %v", cmd.CommandPath(), o.JUnit, err)
		}
	}
	if failed > 0 {
		return &exitcode.Error{Code: exitcode.Problems}
	}
	return nil
}

func asUsage(cmd *cobra.Command, err error) error {
	var in *testInputError
	if errors.As(err, &in) {
		return exitcode.Usagef("%s: %s", cmd.CommandPath(), in.msg)
	}
	return err
}

// run builds the file's bundle and decides its cases; diagnostics of
// manifests that do not compile go to stderr, as `toolgate eval` prints
// them.
func (t *loadedTest) run(stderr io.Writer) (fileOutcome, error) {
	f := &t.file
	paths := make([]string, len(f.Manifests))
	for i, m := range f.Manifests {
		paths[i] = t.rel(m)
	}
	set, b, err := manifest.LoadNamespaceBundle(paths, nil, f.Namespace, f.NamespaceLabels, t.now)
	if err != nil {
		return fileOutcome{}, inputErrorf("%s: manifests: %v", t.path, err)
	}
	var used engine.Usage
	if f.History != "" {
		data, err := os.ReadFile(t.rel(f.History))
		if err != nil {
			return fileOutcome{}, inputErrorf("%s: history: cannot read: %v", t.path, unwrapPathError(err))
		}
		if used, err = historyLedger(data, t.now); err != nil {
			return fileOutcome{}, inputErrorf("%s: history %s: %v", t.path, f.History, err)
		}
	}
	compiled := compileBundle(set, b, stderr)
	out := fileOutcome{path: t.path, name: f.Metadata.Name}
	matched := map[string]bool{}
	for i, c := range f.Cases {
		// Each case is decided on its own, against the history alone:
		// one case's call does not count toward the next one's limits.
		res := compiled.Evaluate(t.requests[i], engine.EvalOptions{Now: clockFrom(t.now), Usage: used, ServiceAccount: c.ServiceAccount,
			Phase: phaseOf(t.requests[i])})
		if res.MatchedRuleID != "" {
			matched[ruleKey(res.MatchedPolicyKind == engine.KindClusterPolicy, res.MatchedPolicyID, res.MatchedRuleID)] = true
		}
		for _, sv := range res.Shadow {
			if sv.Rule != "" {
				matched[ruleKey(sv.Kind == engine.KindClusterPolicy, sv.Policy, sv.Rule)] = true
			}
		}
		diffs, err := compareResult(c.Expect, res)
		if err != nil {
			return fileOutcome{}, fmt.Errorf("%s: %q: %w", t.path, c.Name, err)
		}
		out.cases = append(out.cases, caseOutcome{name: c.Name, diffs: diffs})
	}
	for _, p := range b.Policies {
		for _, r := range p.Rules {
			if id := ruleKey(p.Cluster(), p.ID, r.ID); !matched[id] {
				out.unmatched = append(out.unmatched, id)
			}
		}
	}
	return out, nil
}

// phaseOf is the phase a sidecar's /v1/evaluate judges req in: a request
// carrying output is what a tool returned, judged by result rules; any
// other is a call.
func phaseOf(req engine.Request) engine.Phase {
	if _, ok := req[engine.FieldOutput]; ok {
		return engine.PhaseResult
	}
	return engine.PhaseCall
}

// ruleKey names a rule in --coverage: policy/rule, a ClusterPolicy's
// prefixed with its kind (a Policy may have the same name).
func ruleKey(cluster bool, policy, rule string) string {
	if cluster {
		return engine.KindClusterPolicy + "/" + policy + "/" + rule
	}
	return policy + "/" + rule
}

// compareResult lists, in resultFields order, each expected field whose
// value differs from the result's (as the sidecar writes it; an absent
// field is null). Values compare as JSON: 1 and 1.0 are equal, a list
// compares in order.
func compareResult(expect map[string]json.RawMessage, res engine.Result) ([]string, error) {
	doc, err := res.AppendJSON(nil)
	if err != nil {
		return nil, err
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(doc, &got); err != nil {
		return nil, err
	}
	var diffs []string
	for _, field := range resultFields {
		want, ok := expect[field]
		if !ok {
			continue
		}
		have := got[field]
		if have == nil {
			have = json.RawMessage("null")
		}
		var w, h any
		if json.Unmarshal(want, &w) != nil || json.Unmarshal(have, &h) != nil {
			return nil, fmt.Errorf("expect.%s is not JSON", field)
		}
		if !reflect.DeepEqual(w, h) {
			diffs = append(diffs, fmt.Sprintf("%s: expected %s, got %s", field, compact(want), compact(have)))
		}
	}
	return diffs, nil
}

func compact(raw json.RawMessage) string {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return string(raw)
	}
	return b.String()
}
