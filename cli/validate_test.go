package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

func TestValidateCleanManifests(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"p.yaml": fmt.Sprintf(denyBashPolicy, "") + "---\n" + frozenAgent})
	o := run(t, "", "validate", "-f", dir)
	if o.code != 0 || o.stdout != "" {
		t.Errorf("exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	if o.stderr != "1 Policy and 1 FrozenAgent object(s) valid\n" {
		t.Errorf("stderr %q", o.stderr)
	}
}

// TestValidateReportsEveryProblem puts one of each problem the API server's
// schema or the webhook rejects in a manifest set and expects each, located.
func TestValidateReportsEveryProblem(t *testing.T) {
	long := strings.Repeat("x", 1025)
	dir := testenv.WriteTree(t, map[string]string{
		"a-policies.yaml": `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: Bad_Name, namespace: team-a}
spec:
  defaultEffect: maybe
  rules:
  - id: Not_A_Label
    effect: permit
    conditions:
    - {field: tool_name, operator: like, value: Bash}
  - id: dup
    effect: deny
    description: ` + long + `
    conditions:
    - {field: input..command, operator: eq, value: x}
    - {field: kwargs.amount, operator: gt, value: "1000"}
    - {field: tool_name, operator: in}
    - {field: tool_name, operator: eq, value: a, values: [b]}
    - {field: input.command, operator: matches, value: "(?<=rm)x"}
    - {field: tool_name, operator: exists, value: x}
    - {field: input.command, operator: contains, value: [a]}
  - id: dup
    effect: allow
---
apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {namespace: team-a}
spec:
  rules: []
`,
		"b-frozen.yaml": `apiVersion: toolgate.dev/v1alpha1
kind: FrozenAgent
metadata: {name: f}
spec:
  reason: ` + long + `
`,
		"c-broken.yaml": "apiVersion: toolgate.dev/v1alpha1\nkind: Policy\nmetadata: {name: u}\nspec:\n  rules: [{id: a, effect: allow, when: x}]\n",
		"d-ok.yaml":     fmt.Sprintf(denyBashPolicy, ""),
	})
	o := run(t, "", "validate", "-f", dir)
	if o.code != ExitProblems {
		t.Errorf("exit %d, want %d; stderr %q", o.code, ExitProblems, o.stderr)
	}
	a, b, c := filepath.Join(dir, "a-policies.yaml"), filepath.Join(dir, "b-frozen.yaml"), filepath.Join(dir, "c-broken.yaml")
	want := []string{
		a + `:doc 1: Policy/Bad_Name: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		a + `:doc 1: Policy/Bad_Name: spec.defaultEffect: must be allow or deny, not "maybe"`,
		a + `:doc 1: Policy/Bad_Name: spec.rules[0].id: rule id "Not_A_Label" must be lower-case letters, digits and '-', starting and ending with a letter or digit`,
		a + `:doc 1: Policy/Bad_Name: spec.rules[0].effect: must be allow or deny, not "permit"`,
		a + `:doc 1: Policy/Bad_Name: spec.rules[0].conditions[0].operator: unknown operator "like"`,
		a + `:doc 1: Policy/Bad_Name: spec.rules[1].description: description is 1025 characters long, more than 1024`,
		a + `:doc 1: Policy/Bad_Name: spec.rules[1].conditions[0].field: `,
		a + `:doc 1: Policy/Bad_Name: spec.rules[1].conditions[1].value: operator gt needs a number value, not a string`,
		a + `:doc 1: Policy/Bad_Name: spec.rules[1].conditions[2].values: operator in needs values (a list) or value`,
		a + `:doc 1: Policy/Bad_Name: spec.rules[1].conditions[3].values: set value or values, not both`,
		a + `:doc 1: Policy/Bad_Name: spec.rules[1].conditions[4].value: pattern "(?<=rm)x" does not compile: `,
		a + `:doc 1: Policy/Bad_Name: spec.rules[1].conditions[5].value: operator exists takes no value`,
		a + `:doc 1: Policy/Bad_Name: spec.rules[1].conditions[6].value: operator contains needs a string value, not `,
		a + `:doc 1: Policy/Bad_Name: spec.rules[2].id: duplicate rule id "dup" (also rule 1)`,
		a + `:doc 2: Policy: metadata.name: Required value: name or generateName is required`,
		a + `:doc 2: Policy: spec.rules: a policy needs at least one rule`,
		b + `:doc 1: FrozenAgent/f: spec.agentId: agentId is required`,
		b + `:doc 1: FrozenAgent/f: spec.reason: reason is 1025 characters long, more than 1024`,
		c + `:doc 1: Policy/u: spec.rules[0].when: unknown field`,
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
	if o.stderr != fmt.Sprintf("%d problem(s) in 3 Policy and 1 FrozenAgent object(s)\n", len(want)) {
		t.Errorf("stderr %q", o.stderr)
	}
}

func TestValidateUnreadablePathExits2(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"p.yaml": fmt.Sprintf(denyBashPolicy, "")})
	missing := filepath.Join(dir, "nope")
	o := run(t, "", "validate", "-f", dir, "-f", missing)
	if o.code != ExitUsage || o.stdout != "" || !strings.Contains(o.stderr, missing+": cannot read: no such file or directory") {
		t.Errorf("exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
}

func TestValidateUsage(t *testing.T) {
	o := run(t, "", "validate")
	if o.code != ExitUsage || !strings.Contains(o.stderr, "toolgate validate: -f PATH is required") {
		t.Errorf("exit %d, stderr %q", o.code, o.stderr)
	}
	o = run(t, "", "validate", "-f", t.TempDir(), "-n", "x")
	if o.code != ExitUsage || !strings.Contains(o.stderr, "unknown shorthand flag: 'n'") {
		t.Errorf("validate has no -n: exit %d, stderr %q", o.code, o.stderr)
	}
}

func TestValidateEmptyDirectory(t *testing.T) {
	o := run(t, "", "validate", "-f", t.TempDir())
	if o.code != 0 || o.stderr != "0 Policy and 0 FrozenAgent object(s) valid\n" {
		t.Errorf("exit %d, stderr %q", o.code, o.stderr)
	}
}
