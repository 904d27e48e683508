package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/exitcode"
	"github.com/toolgate/toolgate/internal/testenv"
)

// resultPolicies are the result rules the clients' tests judge with too.
var resultPolicies = filepath.Join("..", "clients", "testdata", "results.yaml")

const awsKeyID = "AKIAIOSFODNN7EXAMPLE"

func TestEvalPhaseResultJudgesTheOutput(t *testing.T) {
	res := oneResult(t, run(t, `{"tool_name":"read_file","input":{"path":"/creds"},"output":{"text":"id=`+awsKeyID+` ok","size":27}}`,
		"eval", "-f", resultPolicies, "--phase", "result", "--request", "-"))
	if res.Decision != engine.Allow || res.Effect != engine.EffectRedact || res.MatchedRuleID != "aws-key" {
		t.Fatalf("a result holding a key: %+v, want allow with effect redact by aws-key", res)
	}
	if want := "id=" + engine.RedactionMark("aws-key") + " ok"; res.Output[engine.OutputText] != want {
		t.Errorf("the printed output.text is %q, want it as delivered: %q", res.Output[engine.OutputText], want)
	}
	if len(res.Redactions) != 1 || res.Redactions[0].Start != 3 || res.Redactions[0].End != 3+len(awsKeyID) {
		t.Errorf("redactions %+v, want one at [3,%d)", res.Redactions, 3+len(awsKeyID))
	}
	if len(res.Explanations) == 0 {
		t.Errorf("no explanations: %+v", res)
	}

	res = oneResult(t, run(t, `{"tool_name":"query","output":{"text":"{\"count\":500}","structured":{"count":500}}}`,
		"eval", "-f", resultPolicies, "--phase", "result", "--request", "-"))
	if res.Decision != engine.Deny || res.MatchedRuleID != "too-many-rows" || res.Output != nil {
		t.Errorf("500 rows: %+v, want deny by too-many-rows and no output", res)
	}

	// The same policies decide a call with call rules only: there are
	// none, so the call is allowed whatever its input holds.
	res = oneResult(t, run(t, `{"tool_name":"write_file","input":{"text":"CONFIDENTIAL"}}`, "eval", "-f", resultPolicies, "--request", "-"))
	if res.Decision != engine.Allow || res.Effect == engine.EffectRedact {
		t.Errorf("a call: %+v, want allow", res)
	}
}

func TestEvalPhaseRefusesWhatItCannotJudge(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"result.json": `{"tool_name":"read_file","output":{"text":"x"}}`,
		"p.yaml": fmt.Sprintf(denyBashPolicy, "")})
	for _, tc := range []struct {
		name, stdin string
		args        []string
		want        string
	}{
		{"a result without output", `{"tool_name":"read_file"}`, []string{"--phase", "result", "--request", "-"},
			"--phase result judges what a tool returned: --request - must carry output {text, structured, isError, size}"},
		{"a call with output", "", []string{"--request", filepath.Join(dir, "result.json")},
			"result.json carries output, what a tool returned: judge it with --phase result"},
		{"an explicit call with output", "", []string{"--phase", "call", "--request", filepath.Join(dir, "result.json")}, "judge it with --phase result"},
		{"an unknown phase", `{"tool_name":"x"}`, []string{"--phase", "after", "--request", "-"}, `--phase "after": want call or result`},
		{"an empty phase", `{"tool_name":"x"}`, []string{"--phase", "", "--request", "-"}, `--phase "": want call or result`},
		{"a phase in capitals", `{"tool_name":"x","output":{}}`, []string{"--phase", "RESULT", "--request", "-"}, `--phase "RESULT": want call or result`},
		{"output a string", `{"tool_name":"x","output":"text"}`, []string{"--phase", "result", "--request", "-"},
			"--request <stdin>: bad request: output must be an object (text, structured, isError, size), not a string"},
		{"output.size negative", `{"tool_name":"x","output":{"size":-1}}`, []string{"--phase", "result", "--request", "-"}, "output.size must be a non-negative integer (bytes), not -1"},
		{"a misspelt output key", `{"tool_name":"x","output":{"Text":"x"}}`, []string{"--phase", "result", "--request", "-"}, `unknown output field "Text"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := run(t, tc.stdin, append([]string{"eval", "-f", filepath.Join(dir, "p.yaml")}, tc.args...)...)
			if o.code != exitcode.Usage || o.stdout != "" || !strings.Contains(o.stderr, tc.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit %d and %q", o.code, o.stdout, o.stderr, exitcode.Usage, tc.want)
			}
		})
	}
}

// The real binary prints the delivered output and fails on deny as asked.
func TestBinaryEvalPhaseResult(t *testing.T) {
	o := runBinary(t, `{"tool_name":"read_file","output":{"text":"CONFIDENTIAL plan"}}`, nil,
		"eval", "-f", resultPolicies, "--phase", "result", "--request", "-", "--fail-on-deny")
	if o.code != exitcode.Problems || !strings.Contains(o.stdout, `"matchedRuleId":"confidential"`) {
		t.Errorf("a withheld result with --fail-on-deny: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	o = runBinary(t, `{"tool_name":"read_file","output":{"text":"`+awsKeyID+`"}}`, nil, "eval", "-f", resultPolicies, "--phase", "result", "--request", "-")
	if res := oneResult(t, o); res.Output[engine.OutputText] != engine.RedactionMark("aws-key") || strings.Contains(o.stdout, awsKeyID) {
		t.Errorf("a redacted result: %s", o.stdout)
	}
}
