package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/exitcode"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestValidateCastToNumber (issue 28): validate refuses castToNumber on an
// operator it does not apply to, on a group, and with a value that is no
// number, each at its location; the schema refuses one that is not a
// boolean; a correct one is valid.
func TestValidateCastToNumber(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{
		"a-ok.yaml": `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: ok, namespace: team-a}
spec:
  rules:
  - id: big
    effect: deny
    conditions:
    - {field: kwargs.amount, operator: gt, value: " 5e3 ", castToNumber: true}
    - {field: kwargs.currency, operator: in, values: [840, "978"], castToNumber: true}
    - any:
      - {field: kwargs.limit, operator: neq, value: 0, castToNumber: true}
      - all:
        - {field: kwargs.n, operator: lte, value: "+1e2", castToNumber: true}
`,
		"b-engine.yaml": `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: engine, namespace: team-a}
spec:
  rules:
  - id: casts
    effect: deny
    conditions:
    - {field: kwargs.amount, operator: contains, value: "5", castToNumber: true}
    - {field: kwargs.amount, operator: eq, value: "0x10", castToNumber: true}
    - {field: kwargs.amount, operator: not_in, values: [1, "NaN"], castToNumber: true}
    - {field: kwargs.amount, operator: gte, value: true, castToNumber: true}
    - any:
      - all:
        - {field: kwargs.amount, operator: is_empty, castToNumber: true}
`,
		"c-schema.yaml": `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: schema, namespace: team-a}
spec:
  rules:
  - id: casts
    effect: deny
    conditions:
    - {field: kwargs.amount, operator: gt, value: 5, castToNumber: "yes"}
`,
	})
	o := run(t, "", "validate", "-f", dir)
	if o.code != exitcode.Problems {
		t.Errorf("exit %d, want %d; stderr %q", o.code, exitcode.Problems, o.stderr)
	}
	b, c := filepath.Join(dir, "b-engine.yaml"), filepath.Join(dir, "c-schema.yaml")
	want := []string{
		b + `:doc 1: Policy/engine: spec.rules[0].conditions[0].castToNumber: castToNumber applies only to eq, neq, in, not_in, gt, gte, lt and lte, not contains`,
		b + `:doc 1: Policy/engine: spec.rules[0].conditions[1].value: castToNumber: "0x10" is not a number`,
		b + `:doc 1: Policy/engine: spec.rules[0].conditions[2].values[1]: castToNumber: "NaN" is not a number`,
		b + `:doc 1: Policy/engine: spec.rules[0].conditions[3].value: castToNumber: a boolean is not a number`,
		b + `:doc 1: Policy/engine: spec.rules[0].conditions[4].any[0].all[0].castToNumber: castToNumber applies only to eq, neq, in, not_in, gt, gte, lt and lte, not is_empty`,
		c + `:doc 1: Policy/schema: spec.rules[0].conditions[0].castToNumber: Invalid value: "string": spec.rules[0].conditions[0].castToNumber in body must be of type boolean`,
		c + `:doc 1: Policy/schema: Invalid value: null: some validation rules were not checked because the object was invalid`,
	}
	lines := strings.Split(strings.TrimSuffix(o.stdout, "\n"), "\n")
	if len(lines) != len(want) {
		t.Errorf("got %d problems, want %d:\n%s", len(lines), len(want), o.stdout)
	}
	for i := range min(len(lines), len(want)) {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("problem %d:\n got %s\nwant %s...", i, lines[i], want[i])
		}
	}
	if strings.Contains(o.stdout, "a-ok.yaml") {
		t.Errorf("a valid castToNumber policy has problems:\n%s", o.stdout)
	}
}
