package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// payPolicy denies payments over 1000, reading the amount as kwargs.amount
// and, with second, also another way.
func payPolicy(name, second string) string {
	return `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: ` + name + `}
spec:
  rules:
  - id: pay-over-cap
    effect: deny
    conditions:
    - {field: tool_name, operator: eq, value: pay}
    - {field: kwargs.amount, operator: gt, value: 1000}
` + second
}

// TestValidateWarnsOnArgumentsReadOneWay: a Policy whose rules read pay's
// amount only as kwargs.amount is valid (exit 0) with a warning, in text
// and in -o json, since a call passing the amount as args.0 or input.amount
// is not read; one that reads it both ways is valid without one.
func TestValidateWarnsOnArgumentsReadOneWay(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{
		"kwargs-only.yaml": payPolicy("kwargs-only", ""),
		"both.yaml": payPolicy("both", `  - id: pay-over-cap-positional
    effect: deny
    conditions:
    - {field: tool_name, operator: eq, value: pay}
    - {field: args.0, operator: gt, value: 1000}
`),
	})
	const message = `tool "pay"'s arguments are read only as kwargs (kwargs.amount): a call passing them as input or args is not read by this policy`
	o := run(t, "", "validate", "-f", dir)
	want := "warning: " + filepath.Join(dir, "kwargs-only.yaml") + ":doc 1: Policy/kwargs-only: spec.rules[0].conditions[1]: " + message
	if o.code != 0 || o.stdout != "" || !strings.HasPrefix(o.stderr, want) || strings.Count(o.stderr, "warning: ") != 1 ||
		!strings.HasSuffix(o.stderr, "\n2 Policy and 0 FrozenAgent object(s) valid\n") {
		t.Errorf("exit %d, stdout %q, stderr %q; want one warning, starting %q", o.code, o.stdout, o.stderr, want)
	}

	o = run(t, "", "validate", "-f", dir, "-o", "json")
	var report validateReport
	if err := json.Unmarshal([]byte(o.stdout), &report); o.code != 0 || err != nil {
		t.Fatalf("exit %d, %v, stdout %q, stderr %q", o.code, err, o.stdout, o.stderr)
	}
	if !report.Valid || len(report.Problems) != 0 || len(report.Warnings) != 1 {
		t.Fatalf("report %+v, want valid with one warning", report)
	}
	w := report.Warnings[0]
	if w.Name != "kwargs-only" || w.Field != "spec.rules[0].conditions[1]" || !strings.HasPrefix(w.Message, message) {
		t.Errorf("warning %+v, want kwargs-only's spec.rules[0].conditions[1]: %s", w, message)
	}
}
