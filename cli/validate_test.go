package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/exitcode"
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
// As in a cluster, the webhook's (engine) checks run only for a Policy the
// schema accepted: a-schema.yaml breaks the schema, b-engine.yaml only what
// the engine checks. Within an object, problems are ordered by field.
func TestValidateReportsEveryProblem(t *testing.T) {
	long := strings.Repeat("x", 1025)
	dir := testenv.WriteTree(t, map[string]string{
		"a-schema.yaml": `apiVersion: toolgate.dev/v1alpha1
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
  - id: dup
    effect: allow
---
apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {namespace: team-a}
spec:
  rules: []
`,
		"b-engine.yaml": `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: engine, namespace: team-a}
spec:
  rules:
  - id: conditions
    effect: deny
    conditions:
    - {field: kwargs.amount, operator: gt, value: "1000"}
    - {field: tool_name, operator: in}
    - {field: tool_name, operator: eq, value: a, values: [b]}
    - {field: input.command, operator: matches, value: "(?<=rm)x"}
    - {field: tool_name, operator: exists, value: x}
    - {field: input.command, operator: contains, value: [a]}
`,
		"c-frozen.yaml": `apiVersion: toolgate.dev/v1alpha1
kind: FrozenAgent
metadata: {name: f}
spec:
  serviceAccount: Not A Name
  reason: ` + long + `
`,
		"d-broken.yaml": "apiVersion: toolgate.dev/v1alpha1\nkind: Policy\nmetadata: {name: u}\nspec:\n  rules: [{id: a, effect: allow, whenever: x}]\n",
		"e-ok.yaml":     fmt.Sprintf(denyBashPolicy, ""),
	})
	o := run(t, "", "validate", "-f", dir)
	if o.code != exitcode.Problems {
		t.Errorf("exit %d, want %d; stderr %q", o.code, exitcode.Problems, o.stderr)
	}
	a, b := filepath.Join(dir, "a-schema.yaml"), filepath.Join(dir, "b-engine.yaml")
	c, d := filepath.Join(dir, "c-frozen.yaml"), filepath.Join(dir, "d-broken.yaml")
	want := []string{
		a + `:doc 1: Policy/Bad_Name: metadata.name: Invalid value: "Bad_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		a + `:doc 1: Policy/Bad_Name: spec.defaultEffect: Unsupported value: "maybe": supported values: "allow", "deny"`,
		a + `:doc 1: Policy/Bad_Name: spec.rules[0].conditions[0].operator: Unsupported value: "like": supported values: "eq", "neq", `,
		a + `:doc 1: Policy/Bad_Name: spec.rules[0].effect: Unsupported value: "permit": supported values: "allow", "deny"`,
		a + `:doc 1: Policy/Bad_Name: spec.rules[0].id: Invalid value: "Not_A_Label": spec.rules[0].id in body should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'`,
		a + `:doc 1: Policy/Bad_Name: spec.rules[1].conditions[0].field: Invalid value: "input..command": spec.rules[1].conditions[0].field in body should match `,
		a + `:doc 1: Policy/Bad_Name: spec.rules[1].description: Too long: may not be more than 1024 bytes`,
		a + `:doc 1: Policy/Bad_Name: spec.rules[2]: Duplicate value: {"id":"dup"}`,
		// The Policy CRD has CEL rules (spec.rules[].priority), which the
		// API server skips after such errors, and says so.
		a + `:doc 1: Policy/Bad_Name: Invalid value: null: some validation rules were not checked because the object was invalid`,
		a + `:doc 2: Policy: metadata.name: Required value: name or generateName is required`,
		a + `:doc 2: Policy: spec.rules: Invalid value: 0: spec.rules in body should have at least 1 items`,
		a + `:doc 2: Policy: Invalid value: null: some validation rules were not checked because the object was invalid`,
		b + `:doc 1: Policy/engine: spec.rules[0].conditions[0].value: operator gt needs a number value, not a string`,
		b + `:doc 1: Policy/engine: spec.rules[0].conditions[1].values: operator in needs values (a list) or value`,
		b + `:doc 1: Policy/engine: spec.rules[0].conditions[2].values: set value or values, not both`,
		b + `:doc 1: Policy/engine: spec.rules[0].conditions[3].value: pattern "(?<=rm)x" does not compile: `,
		b + `:doc 1: Policy/engine: spec.rules[0].conditions[4].value: operator exists takes no value`,
		b + `:doc 1: Policy/engine: spec.rules[0].conditions[5].value: operator contains needs a string value, not `,
		c + `:doc 1: FrozenAgent/f: spec.reason: Too long: may not be more than 1024 bytes`,
		c + `:doc 1: FrozenAgent/f: spec.serviceAccount: Invalid value: "Not A Name": spec.serviceAccount in body should match`,
		c + `:doc 1: FrozenAgent/f: Invalid value: null: some validation rules were not checked because the object was invalid`,
		d + `:doc 1: Policy/u: spec.rules[0].whenever: unknown field`,
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
	// Every object read is counted, those the schema rejected included.
	if o.stderr != fmt.Sprintf("%d problem(s) in 5 Policy and 1 FrozenAgent object(s)\n", len(want)) {
		t.Errorf("stderr %q", o.stderr)
	}
}

func TestValidateUnreadablePathExits2(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"p.yaml": fmt.Sprintf(denyBashPolicy, "")})
	missing := filepath.Join(dir, "nope")
	o := run(t, "", "validate", "-f", dir, "-f", missing)
	if o.code != exitcode.Usage || o.stdout != "" || !strings.Contains(o.stderr, missing+": cannot read: no such file or directory") {
		t.Errorf("exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
}

func TestValidateUsage(t *testing.T) {
	o := run(t, "", "validate")
	if o.code != exitcode.Usage || !strings.Contains(o.stderr, "toolgate validate: -f PATH is required") {
		t.Errorf("exit %d, stderr %q", o.code, o.stderr)
	}
	o = run(t, "", "validate", "-f", t.TempDir(), "-n", "x")
	if o.code != exitcode.Usage || !strings.Contains(o.stderr, "unknown shorthand flag: 'n'") {
		t.Errorf("validate has no -n: exit %d, stderr %q", o.code, o.stderr)
	}
}

func TestValidateEmptyDirectory(t *testing.T) {
	o := run(t, "", "validate", "-f", t.TempDir())
	if o.code != 0 || o.stderr != "0 Policy and 0 FrozenAgent object(s) valid\n" {
		t.Errorf("exit %d, stderr %q", o.code, o.stderr)
	}
}

// TestValidatePrintsWebhookWarnings: a Policy the webhook accepts with
// warnings (engine/lint) is valid, and the warnings go to stderr, located,
// as kubectl prints the webhook's.
func TestValidatePrintsWebhookWarnings(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"p.yaml": `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: pay-limit}
spec:
  evaluation: tiered
  rules:
  - id: pay
    effect: allow
    targets: {tools: [pay]}
    when: {rateLimit: {max: 10, window: 1h}}
`})
	o := run(t, "", "validate", "-f", dir)
	want := "warning: " + filepath.Join(dir, "p.yaml") + ":doc 1: Policy/pay-limit: spec.rules[0].when.rateLimit: an allow rule with rateLimit applies only once the limit is reached"
	if o.code != 0 || o.stdout != "" || !strings.HasPrefix(o.stderr, want) ||
		!strings.HasSuffix(o.stderr, "\n1 Policy and 0 FrozenAgent object(s) valid\n") {
		t.Errorf("exit %d, stdout %q, stderr %q; want stderr starting %q", o.code, o.stdout, o.stderr, want)
	}
}
