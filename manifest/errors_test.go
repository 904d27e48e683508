package manifest

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

const head = "apiVersion: toolgate.dev/v1alpha1\nkind: Policy\nmetadata: {name: p}\n"

// notChecked is the API server's note that it skipped the CEL rules after an
// error that stops them.
const notChecked = "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"

// TestLoadErrors feeds malformed input of every kind and checks the exact
// message a user sees: file, document, object, field and reason.
func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name       string
		files      map[string]string
		want       []string
		unreadable bool
	}{
		{
			name:  "YAML syntax error, line counted from the file start",
			files: map[string]string{"m.yaml": fmt.Sprintf(policyYAML, "a") + "---\n\nspec: [\n"},
			want:  []string{"m.yaml:doc 2: yaml: line 13: did not find expected node content"},
		},
		{
			name:  "mapping error",
			files: map[string]string{"m.yaml": "kind: Policy\nmetadata: name: x\n"},
			want:  []string{"m.yaml:doc 1: yaml: line 2: mapping values are not allowed in this context"},
		},
		{
			name:  "duplicate YAML key",
			files: map[string]string{"m.yaml": head + "kind: FrozenAgent\nspec: {}\n"},
			want:  []string{`m.yaml:doc 1: yaml: unmarshal errors: line 4: key "kind" already set in map`},
		},
		{
			name:  "duplicate YAML key in a later document",
			files: map[string]string{"m.yaml": fmt.Sprintf(policyYAML, "a") + "---\n" + head + "metadata: {}\n"},
			want:  []string{`m.yaml:doc 2: yaml: unmarshal errors: line 15: key "metadata" already set in map`},
		},
		{
			name:  "bad document separator",
			files: map[string]string{"m.yaml": fmt.Sprintf(policyYAML, "a") + "--- kind: Policy\n"},
			want:  []string{`m.yaml:doc 2: line 11: invalid YAML document separator: "--- kind: Policy"`},
		},
		{
			name:  "missing kind",
			files: map[string]string{"m.yaml": "apiVersion: toolgate.dev/v1alpha1\nmetadata: {name: p}\n"},
			want:  []string{"m.yaml:doc 1: kind: missing: every document needs apiVersion: toolgate.dev/v1alpha1 and kind: one of Policy, FrozenAgent, Agent, MCPUpstream, ClusterPolicy, ClusterFrozenAgent, PolicyException"},
		},
		{
			name:  "kind not a string",
			files: map[string]string{"m.yaml": "apiVersion: toolgate.dev/v1alpha1\nkind: [Policy]\n"},
			want:  []string{"m.yaml:doc 1: kind: must be a string, not an array"},
		},
		{
			name:  "missing apiVersion",
			files: map[string]string{"m.yaml": "kind: Policy\nmetadata: {name: p}\n"},
			want:  []string{"m.yaml:doc 1: apiVersion: missing: every document needs apiVersion: toolgate.dev/v1alpha1 and kind: one of Policy, FrozenAgent, Agent, MCPUpstream, ClusterPolicy, ClusterFrozenAgent, PolicyException"},
		},
		{
			name:  "unknown kind",
			files: map[string]string{"m.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n"},
			want:  []string{`m.yaml:doc 1: Deployment/web: kind: unknown kind "Deployment" (apiVersion "apps/v1"): toolgate reads Policy, FrozenAgent, Agent, MCPUpstream, ClusterPolicy, ClusterFrozenAgent, PolicyException of toolgate.dev/v1alpha1`},
		},
		{
			name:  "wrong apiVersion",
			files: map[string]string{"m.yaml": strings.Replace(head, "v1alpha1", "v1", 1) + "spec: {}\n"},
			want:  []string{`m.yaml:doc 1: Policy/p: apiVersion: unknown apiVersion "toolgate.dev/v1" for Policy: want toolgate.dev/v1alpha1`},
		},
		{
			name:  "unknown fields, each with its path",
			files: map[string]string{"m.yaml": head + "spec:\n  rules:\n  - {id: a, effect: allow}\n  - id: b\n    effect: deny\n    conditions: [{field: x, operator: eq, value: 1, valu: 2}]\n  extra: true\n"},
			want: []string{
				`m.yaml:doc 1: Policy/p: spec.extra: unknown field`,
				`m.yaml:doc 1: Policy/p: spec.rules[1].conditions[0].valu: unknown field`,
			},
		},
		{
			name:  "field names are case-sensitive",
			files: map[string]string{"m.yaml": head + "spec:\n  Rules: [{id: a, effect: allow}]\n"},
			want:  []string{`m.yaml:doc 1: Policy/p: spec.Rules: unknown field`},
		},
		{
			name:  "wrong type, located with its list index",
			files: map[string]string{"m.yaml": head + "spec:\n  rules:\n  - {id: a, effect: allow}\n  - {id: b, effect: 5}\n"},
			want: []string{
				`m.yaml:doc 1: Policy/p: spec.rules[1].effect: Invalid value: "integer": spec.rules[1].effect in body must be of type string: "integer"`,
				`m.yaml:doc 1: Policy/p: spec.rules[1].effect: Unsupported value: 5: supported values: "allow", "deny", "warn", "audit", "ask", "redact"`,
				`m.yaml:doc 1: Policy/p: Invalid value: null: ` + notChecked,
			},
		},
		{
			name:  "priority out of int32 range",
			files: map[string]string{"m.yaml": head + "spec:\n  priority: 3000000000\n  rules: [{id: a, effect: allow}]\n"},
			// The API server's validator names the field only in its message.
			want: []string{`m.yaml:doc 1: Policy/p: Invalid value: "": Checked value must be of type integer with format int32 in spec.priority`},
		},
		{
			name:  "rule that is not an object",
			files: map[string]string{"m.yaml": head + "spec:\n  rules: [deny-all]\n"},
			want: []string{
				`m.yaml:doc 1: Policy/p: spec.rules[0]: Invalid value: "string": spec.rules[0] in body must be of type object: "string"`,
				`m.yaml:doc 1: Policy/p: spec.rules[0]: Invalid value: "deny-all": must be an object for an array of list-type map`,
				`m.yaml:doc 1: Policy/p: Invalid value: null: ` + notChecked,
			},
		},
		{
			name:  "expiresAt not a time",
			files: map[string]string{"m.yaml": "apiVersion: toolgate.dev/v1alpha1\nkind: FrozenAgent\nmetadata: {name: f}\nspec: {agentId: a, expiresAt: tomorrow}\n"},
			want: []string{
				`m.yaml:doc 1: FrozenAgent/f: spec.expiresAt: Invalid value: "tomorrow": spec.expiresAt in body must be of type date-time: "tomorrow"`,
				`m.yaml:doc 1: FrozenAgent/f: Invalid value: null: ` + notChecked,
			},
		},
		{
			name:  "expiresAt a number",
			files: map[string]string{"m.yaml": "apiVersion: toolgate.dev/v1alpha1\nkind: FrozenAgent\nmetadata: {name: f}\nspec: {agentId: a, expiresAt: 5}\n"},
			want: []string{
				`m.yaml:doc 1: FrozenAgent/f: spec.expiresAt: Invalid value: "int64": spec.expiresAt in body must be of type date-time: "int64"`,
				`m.yaml:doc 1: FrozenAgent/f: Invalid value: null: ` + notChecked,
			},
		},
		{
			name:  "metadata the API server cannot decode",
			files: map[string]string{"m.yaml": "apiVersion: toolgate.dev/v1alpha1\nkind: FrozenAgent\nmetadata: {name: 5}\nspec: {agentId: a}\n"},
			want:  []string{`m.yaml:doc 1: FrozenAgent: metadata.name: json: cannot unmarshal number into Go struct field ObjectMeta.name of type string`},
		},
		{
			name:  "metadata that is not an object",
			files: map[string]string{"m.yaml": "apiVersion: toolgate.dev/v1alpha1\nkind: FrozenAgent\nmetadata: 5\nspec: {agentId: a}\n"},
			want:  []string{`m.yaml:doc 1: FrozenAgent: metadata: json: cannot unmarshal number into Go value of type v1.ObjectMeta`},
		},
		{
			name:  "spec that is not an object",
			files: map[string]string{"m.yaml": "apiVersion: toolgate.dev/v1alpha1\nkind: FrozenAgent\nmetadata: {name: f}\nspec: [agentId]\n"},
			want: []string{
				`m.yaml:doc 1: FrozenAgent/f: spec: Invalid value: "array": spec in body must be of type object: "array"`,
				`m.yaml:doc 1: FrozenAgent/f: Invalid value: null: ` + notChecked,
			},
		},
		{
			name:  "unknown metadata field",
			files: map[string]string{"m.yaml": "apiVersion: toolgate.dev/v1alpha1\nkind: FrozenAgent\nmetadata: {name: f, label: x}\nspec: {agentId: a}\n"},
			want:  []string{`m.yaml:doc 1: FrozenAgent/f: metadata.label: unknown field`},
		},
		{
			name:  "a CEL rule of the CRD, with its message",
			files: map[string]string{"m.yaml": "apiVersion: toolgate.dev/v1alpha1\nkind: FrozenAgent\nmetadata: {name: f}\nspec: {agentId: \" a\"}\n"},
			want:  []string{`m.yaml:doc 1: FrozenAgent/f: spec: Invalid value: agentId must not start or end with whitespace`},
		},
		{
			name: "problems ordered by field, list indices by number",
			files: map[string]string{"m.yaml": head + "spec:\n  rules: [{id: r0, effect: allow}, {id: r1, effect: allow}, {id: r2, effect: never},\n" +
				"    {id: r3, effect: allow}, {id: r4, effect: allow}, {id: r5, effect: allow}, {id: r6, effect: allow},\n" +
				"    {id: r7, effect: allow}, {id: r8, effect: allow}, {id: r9, effect: allow}, {id: r10, effect: never}]\n"},
			want: []string{
				`m.yaml:doc 1: Policy/p: spec.rules[2].effect: Unsupported value: "never": supported values: "allow", "deny", "warn", "audit", "ask", "redact"`,
				`m.yaml:doc 1: Policy/p: spec.rules[10].effect: Unsupported value: "never": supported values: "allow", "deny", "warn", "audit", "ask", "redact"`,
				`m.yaml:doc 1: Policy/p: Invalid value: null: ` + notChecked,
			},
		},
		{
			name:  "document that is a scalar",
			files: map[string]string{"m.yaml": "just text\n"},
			want:  []string{`m.yaml:doc 1: must be an object with apiVersion, kind, metadata and spec`},
		},
		{
			name:  "document that is a list",
			files: map[string]string{"m.yaml": "- a\n- b\n"},
			want:  []string{`m.yaml:doc 1: must be an object with apiVersion, kind, metadata and spec`},
		},
		{
			name:  "JSON syntax error",
			files: map[string]string{"m.json": "{\"kind\": \"Policy\",\n \"spec\": }\n"},
			want:  []string{`m.json:doc 1: line 2: invalid JSON: invalid character '}' looking for beginning of value`},
		},
		{
			name:  "truncated JSON",
			files: map[string]string{"m.json": "{\"kind\": \"Policy\",\n"},
			want:  []string{`m.json:doc 1: line 2: invalid JSON: unexpected EOF`},
		},
		{
			name:  "JSON duplicate field",
			files: map[string]string{"m.json": `{"apiVersion":"toolgate.dev/v1alpha1","kind":"FrozenAgent","metadata":{"name":"f"},"spec":{"agentId":"a","agentId":"b"}}`},
			want:  []string{`m.json:doc 1: FrozenAgent/f: spec.agentId: duplicate field`},
		},
		{
			name: "duplicate names in one namespace",
			files: map[string]string{
				"a.yaml": fmt.Sprintf(policyYAML, "p") + "---\n" + fmt.Sprintf(policyYAML, "p"),
				"b.yaml": "apiVersion: toolgate.dev/v1alpha1\nkind: FrozenAgent\nmetadata: {name: p}\nspec: {agentId: a}\n",
			},
			want: []string{`a.yaml:doc 2: Policy/p: metadata.name: duplicate Policy "p" without a namespace (first defined at a.yaml:doc 1)`},
		},
		{
			name:  "nested List",
			files: map[string]string{"l.yaml": "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: List, items: []}\n"},
			want:  []string{`l.yaml:doc 1: List: items[0].kind: a List cannot contain another List`},
		},
		{
			name:  "List item with an unknown field",
			files: map[string]string{"l.yaml": "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap}\n- " + strings.ReplaceAll(head, "\n", "\n  ") + "spec: {rules: [{id: a, effect: allow}], bogus: 1}\n"},
			want: []string{
				`l.yaml:doc 1: ConfigMap: items[0].kind: unknown kind "ConfigMap" (apiVersion "v1"): toolgate reads Policy, FrozenAgent, Agent, MCPUpstream, ClusterPolicy, ClusterFrozenAgent, PolicyException of toolgate.dev/v1alpha1`,
				`l.yaml:doc 1: Policy/p: items[1].spec.bogus: unknown field`,
			},
		},
		{
			name:  "List items not a list",
			files: map[string]string{"l.yaml": "apiVersion: v1\nkind: List\nitems: 5\n"},
			want:  []string{`l.yaml:doc 1: List: items: must be a list of objects`},
		},
		{
			name:  "List of another kind",
			files: map[string]string{"l.yaml": "apiVersion: toolgate.dev/v1alpha1\nkind: WidgetList\nitems: []\n"},
			want:  []string{`l.yaml:doc 1: WidgetList: kind: unknown kind "WidgetList": toolgate reads Policy, FrozenAgent, Agent, MCPUpstream, ClusterPolicy, ClusterFrozenAgent, PolicyException and their lists`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := testenv.WriteTree(t, tt.files)
			_, err := Load([]string{dir}, nil)
			got := errorLines(t, err, dir)
			if !slices.Equal(got, tt.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
			if es, _ := err.(Errors); es.Unreadable() != tt.unreadable {
				t.Errorf("Unreadable() = %v, want %v", es.Unreadable(), tt.unreadable)
			}
		})
	}
}

func TestLoadMissingPath(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.yaml")
	_, err := Load([]string{missing, dir}, nil)
	got := errorLines(t, err, "")
	want := []string{missing + ": cannot read: no such file or directory"}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	if es := err.(Errors); !es.Unreadable() {
		t.Error("a missing path must be reported as unreadable")
	}
}
