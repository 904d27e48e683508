package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/exitcode"
	"github.com/toolgate/toolgate/internal/testenv"
)

func TestEvalDecides(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"p.yaml": fmt.Sprintf(denyBashPolicy, ""), "req.json": `{"tool_name":"Bash","input":{"command":"ls"}}`})
	res := oneResult(t, run(t, "", "eval", "-f", filepath.Join(dir, "p.yaml"), "--request", filepath.Join(dir, "req.json")))
	if res.Decision != engine.Deny || res.MatchedPolicyID != "no-bash" || res.MatchedPolicyVersion != 1 ||
		res.MatchedRuleID != "deny-bash" || res.Reason != "no shell" || res.Code != "deny-bash" {
		t.Errorf("result %+v; want a rule's deny coded by the rule's id, as the sidecar answers", res)
	}
	res = oneResult(t, run(t, `{"tool_name":"Read"}`, "eval", "-f", filepath.Join(dir, "p.yaml"), "--request", "-"))
	if res.Decision != engine.Allow || res.MatchedRuleID != "" || res.Code != "" {
		t.Errorf("default allow: %+v", res)
	}
}

func TestEvalStdoutIsExactlyOneJSONObject(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"p.yaml": fmt.Sprintf(denyBashPolicy, "")})
	o := run(t, `{"tool_name":"Bash"}`, "eval", "-f", dir, "--request", "-")
	oneResult(t, o)
	if o.stderr != "" {
		t.Errorf("stderr on a clean evaluation: %q", o.stderr)
	}
	var fields map[string]json.RawMessage
	_ = json.Unmarshal([]byte(o.stdout), &fields)
	for _, k := range []string{"decision", "matchedPolicyId", "matchedPolicyVersion", "matchedRuleId", "reason", "latencyMs"} {
		if _, ok := fields[k]; !ok {
			t.Errorf("result lacks %q: %s", k, o.stdout)
		}
	}
	if _, ok := fields["trace"]; ok {
		t.Errorf("trace without --explain: %s", o.stdout)
	}
}

func TestEvalEmptyDirectoryDeniesNoPolicies(t *testing.T) {
	res := oneResult(t, run(t, `{"tool_name":"Read"}`, "eval", "-f", t.TempDir(), "--request", "-"))
	if res.Decision != engine.Deny || res.Code != engine.CodeNoPolicies {
		t.Errorf("empty dir: %+v", res)
	}
}

func TestEvalNestedDirectories(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{
		"team/a/no-bash.yaml": fmt.Sprintf(denyBashPolicy, ""),
		"team/b/c/allow.json": `{"apiVersion":"toolgate.dev/v1alpha1","kind":"Policy","metadata":{"name":"allow-read"},
			"spec":{"priority":5,"defaultEffect":"deny","rules":[{"id":"read","effect":"allow","conditions":[{"field":"tool_name","operator":"eq","value":"Read"}]}]}}`,
	})
	if res := oneResult(t, run(t, `{"tool_name":"Read"}`, "eval", "-f", dir, "--request", "-")); res.MatchedPolicyID != "allow-read" || res.Decision != engine.Allow {
		t.Errorf("Read: %+v", res)
	}
	if res := oneResult(t, run(t, `{"tool_name":"Bash"}`, "eval", "-f", dir, "--request", "-")); res.MatchedPolicyID != "no-bash" {
		t.Errorf("Bash: %+v", res)
	}
	if res := oneResult(t, run(t, `{"tool_name":"Write"}`, "eval", "-f", dir, "--request", "-")); res.Decision != engine.Deny || res.MatchedRuleID != "" {
		t.Errorf("Write must get the first policy's default deny: %+v", res)
	}
}

func TestEvalExplainAddsTrace(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"p.yaml": fmt.Sprintf(denyBashPolicy, "")})
	res := oneResult(t, run(t, `{"tool_name":"Bash"}`, "eval", "-f", dir, "--request", "-", "--explain"))
	if len(res.Trace) != 1 {
		t.Fatalf("trace %+v", res.Trace)
	}
	tr := res.Trace[0]
	if tr.PolicyID != "no-bash" || tr.RuleID != "deny-bash" || !tr.Matched || len(tr.Conditions) != 1 ||
		tr.Conditions[0].Resolved != "Bash" || !tr.Conditions[0].Held {
		t.Errorf("trace %+v", tr)
	}
}

func TestEvalNowAfterExpiresAtLiftsFreeze(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"p.yaml": fmt.Sprintf(denyBashPolicy, ""), "f.yaml": frozenAgent})
	req := `{"tool_name":"Read","agent_id":"AGENT-7"}`
	tests := []struct {
		now  string
		code engine.Code
		want engine.Decision
	}{
		{"2029-12-31T23:59:59Z", engine.CodeAgentFrozen, engine.Deny},
		{"2029-12-31T23:59:59.999+00:00", engine.CodeAgentFrozen, engine.Deny},
		{"2030-01-01T00:00:00Z", "", engine.Allow}, // expiresAt is the first instant it no longer applies
		{"2030-01-01T01:00:00+02:00", engine.CodeAgentFrozen, engine.Deny},
		{"2031-06-01T00:00:00Z", "", engine.Allow},
	}
	for _, tt := range tests {
		res := oneResult(t, run(t, req, "eval", "-f", dir, "--request", "-", "--now", tt.now))
		if res.Code != tt.code || res.Decision != tt.want {
			t.Errorf("--now %s: %+v, want %s %q", tt.now, res, tt.want, tt.code)
		}
		if tt.code == engine.CodeAgentFrozen && res.Reason != "incident 42" {
			t.Errorf("--now %s: reason %q", tt.now, res.Reason)
		}
	}
}

func TestEvalCompileDiagnosticsGoToStderr(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"bad.yaml": fmt.Sprintf(denyBashPolicy, "") + `---
apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: broken}
spec:
  priority: 10
  rules:
  - id: ok
    effect: allow
  - id: lookahead
    effect: deny
    conditions:
    - {field: input.command, operator: matches, value: "rm(?=x)"}
`})
	o := run(t, `{"tool_name":"Read"}`, "eval", "-f", dir, "--request", "-")
	res := oneResult(t, o)
	if res.Decision != engine.Deny || res.Code != engine.CodePolicyCompileError || res.MatchedPolicyID != "broken" {
		t.Errorf("result %+v", res)
	}
	want := filepath.Join(dir, "bad.yaml") + ":doc 2: Policy/broken: spec.rules[1].conditions[0].value: pattern \"rm(?=x)\" does not compile: "
	if !strings.HasPrefix(o.stderr, want) || strings.Count(o.stderr, "\n") != 1 {
		t.Errorf("stderr %q, want one line starting %q", o.stderr, want)
	}
}

func TestEvalNamespaces(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{
		"a.yaml":    strings.Replace(fmt.Sprintf(denyBashPolicy, "-a"), "name: no-bash-a", "name: no-bash-a\n  namespace: team-a", 1),
		"b.yaml":    strings.Replace(fmt.Sprintf(denyBashPolicy, "-b"), "name: no-bash-b", "name: no-bash-b\n  namespace: team-b", 1),
		"none.yaml": fmt.Sprintf(denyBashPolicy, "-none") + "  priority: 1\n",
	})
	res := oneResult(t, run(t, `{"tool_name":"Bash"}`, "eval", "-f", dir, "--request", "-", "-n", "team-b", "--explain"))
	var policies []string
	for _, tr := range res.Trace {
		policies = append(policies, tr.PolicyID)
	}
	if res.MatchedPolicyID != "no-bash-none" || len(res.Trace) != 1 {
		t.Errorf("-n team-b reached %v, result %+v", policies, res)
	}
	res = oneResult(t, run(t, `{"tool_name":"Read"}`, "eval", "-f", dir, "--request", "-", "-n", "team-c", "--explain"))
	if len(res.Trace) != 0 || res.Decision != engine.Allow {
		t.Errorf("-n team-c keeps only the namespace-less policy: %+v", res)
	}
	// One namespace plus namespace-less objects is one bundle.
	res = oneResult(t, run(t, `{"tool_name":"Bash"}`, "eval", "-f", filepath.Join(dir, "a.yaml"), "-f", filepath.Join(dir, "none.yaml"), "--request", "-"))
	if res.MatchedPolicyID != "no-bash-none" {
		t.Errorf("a + none: %+v", res)
	}
}

func TestEvalManifestsFromStdin(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"req.json": `{"tool_name":"Bash"}`})
	res := oneResult(t, run(t, fmt.Sprintf(denyBashPolicy, ""), "eval", "-f", "-", "--request", filepath.Join(dir, "req.json")))
	if res.MatchedRuleID != "deny-bash" {
		t.Errorf("%+v", res)
	}
}

// TestEvalInputErrors: every malformed input exits 2 with a message naming
// where the problem is, and prints nothing on stdout.
func TestEvalInputErrors(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{
		"ok/p.yaml":          fmt.Sprintf(denyBashPolicy, ""),
		"yaml/p.yaml":        fmt.Sprintf(denyBashPolicy, "") + "---\nkind: Policy\n  bad: indent\n",
		"kind/p.yaml":        "apiVersion: toolgate.dev/v1alpha1\nkind: Rule\nmetadata: {name: x}\n",
		"version/p.yaml":     strings.Replace(fmt.Sprintf(denyBashPolicy, ""), "v1alpha1", "v1beta1", 1),
		"field/p.yaml":       strings.Replace(fmt.Sprintf(denyBashPolicy, ""), "effect: deny", "effect: deny\n    weight: 3", 1),
		"dups/a.yaml":        fmt.Sprintf(denyBashPolicy, ""),
		"dups/b/c.yaml":      fmt.Sprintf(denyBashPolicy, ""),
		"nsdup/a.yaml":       strings.Replace(fmt.Sprintf(denyBashPolicy, ""), "name: no-bash", "name: no-bash\n  namespace: team-a", 1),
		"ns/a.yaml":          strings.Replace(fmt.Sprintf(denyBashPolicy, "-a"), "name: no-bash-a", "name: no-bash-a\n  namespace: team-a", 1),
		"ns/b.yaml":          strings.Replace(fmt.Sprintf(denyBashPolicy, "-b"), "name: no-bash-b", "name: no-bash-b\n  namespace: team-b", 1),
		"req/ok.json":        `{"tool_name":"Bash"}`,
		"req/bad.json":       `{"tool_name":"Bash",}`,
		"req/array.json":     `[{"tool_name":"Bash"}]`,
		"req/number.json":    `{"tool_name":42}`,
		"req/missing.json":   `{"input":{"command":"ls"}}`,
		"req/trailing.json":  `{"tool_name":"Bash"} {"tool_name":"Read"}`,
		"req/empty.json":     ``,
		"req/null-tool.json": `{"tool_name":null}`,
	})
	p := func(rel string) string { return filepath.Join(dir, filepath.FromSlash(rel)) }
	ok, req := p("ok"), p("req/ok.json")
	tests := []struct {
		name  string
		stdin string
		args  []string
		want  string // stderr must contain it
	}{
		{"no -f", "", []string{"eval", "--request", req}, "toolgate eval: -f PATH is required"},
		{"no --request", "", []string{"eval", "-f", ok}, "toolgate eval: --request FILE|- is required"},
		{"missing path", "", []string{"eval", "-f", p("nope"), "--request", req}, p("nope") + ": cannot read: no such file or directory"},
		{"YAML syntax error", "", []string{"eval", "-f", p("yaml"), "--request", req}, p("yaml/p.yaml") + ":doc 2: yaml: line 14: mapping values are not allowed in this context"},
		{"unknown kind", "", []string{"eval", "-f", p("kind"), "--request", req}, p("kind/p.yaml") + `:doc 1: Rule/x: kind: unknown kind "Rule"`},
		{"wrong apiVersion", "", []string{"eval", "-f", p("version"), "--request", req}, p("version/p.yaml") + `:doc 1: Policy/no-bash: apiVersion: unknown apiVersion "toolgate.dev/v1beta1" for Policy: want toolgate.dev/v1alpha1`},
		{"unknown field", "", []string{"eval", "-f", p("field"), "--request", req}, p("field/p.yaml") + ":doc 1: Policy/no-bash: spec.rules[0].weight: unknown field"},
		{"duplicate names", "", []string{"eval", "-f", p("dups"), "--request", req}, p("dups/b/c.yaml") + `:doc 1: Policy/no-bash: metadata.name: duplicate Policy "no-bash" without a namespace (first defined at ` + p("dups/a.yaml") + ":doc 1)"},
		{"duplicates once a namespace is chosen", "", []string{"eval", "-f", p("nsdup"), "-f", ok, "--request", req}, `metadata.name: duplicate Policy "no-bash" in namespace "team-a"`},
		{"several namespaces", "", []string{"eval", "-f", p("ns"), "--request", req}, "objects from several namespaces (team-a, team-b): a bundle is per namespace, choose one with -n"},
		{"bad -n", "", []string{"eval", "-f", ok, "--request", req, "-n", "Team_A"}, `toolgate eval: -n "Team_A" is not a namespace name`},
		{"request not JSON", "", []string{"eval", "-f", ok, "--request", p("req/bad.json")}, "--request " + p("req/bad.json") + ": bad request: not valid JSON"},
		{"request is an array", "", []string{"eval", "-f", ok, "--request", p("req/array.json")}, "bad request: the request must be a JSON object, not an array"},
		{"tool_name a number", "", []string{"eval", "-f", ok, "--request", p("req/number.json")}, "bad request: tool_name must be a string, not a number"},
		{"tool_name null", "", []string{"eval", "-f", ok, "--request", p("req/null-tool.json")}, "bad request: tool_name must be a string, not null"},
		{"tool_name missing", "", []string{"eval", "-f", ok, "--request", p("req/missing.json")}, "bad request: tool_name is required"},
		{"agentId for agent_id", `{"tool_name":"Bash","agentId":"a-1"}`, []string{"eval", "-f", ok, "--request", "-"}, `--request <stdin>: bad request: unknown field "agentId": did you mean "agent_id"?`},
		{"two requests", "", []string{"eval", "-f", ok, "--request", p("req/trailing.json")}, "bad request: trailing data after the JSON object"},
		{"empty request", "", []string{"eval", "-f", ok, "--request", p("req/empty.json")}, "bad request: not valid JSON"},
		{"request from stdin, not JSON", "tool_name: Bash", []string{"eval", "-f", ok, "--request", "-"}, "--request <stdin>: bad request: not valid JSON"},
		{"request file missing", "", []string{"eval", "-f", ok, "--request", p("req/none.json")}, "--request " + p("req/none.json") + ": cannot read: "},
		{"bad --now", "", []string{"eval", "-f", ok, "--request", req, "--now", "tomorrow"}, `--now "tomorrow" is not an RFC 3339 time`},
		{"--now without zone", "", []string{"eval", "-f", ok, "--request", req, "--now", "2030-01-01T00:00:00"}, `--now "2030-01-01T00:00:00" is not an RFC 3339 time`},
		{"stdin twice", "", []string{"eval", "-f", "-", "--request", "-"}, "toolgate eval: -f - and --request - cannot both read stdin"},
		{"unknown flag", "", []string{"eval", "-f", ok, "--request", req, "--explian"}, "toolgate eval: unknown flag: --explian (see toolgate eval --help)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := run(t, tt.stdin, tt.args...)
			if o.code != exitcode.Usage {
				t.Errorf("exit %d, want %d; stderr:\n%s", o.code, exitcode.Usage, o.stderr)
			}
			if o.stdout != "" {
				t.Errorf("stdout must be empty on an input error: %q", o.stdout)
			}
			if !strings.Contains(o.stderr, tt.want) {
				t.Errorf("stderr:\n%s\nwant it to contain:\n%s", o.stderr, tt.want)
			}
		})
	}
}
