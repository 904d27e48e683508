package cli

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/exitcode"
	"github.com/toolgate/toolgate/internal/testenv"
)

const testHeader = `apiVersion: cli.toolgate.dev/v1alpha1
kind: Test
metadata: {name: shell}
manifests: [policies/]
`

// policyTestTree is a directory of policies with a test file beside them.
func policyTestTree(t *testing.T, test string, extra map[string]string) string {
	files := map[string]string{
		"policies/p.yaml":          fmt.Sprintf(denyBashPolicy, ""),
		"policies/freeze.yaml":     frozenAgent,
		"shell.toolgate-test.yaml": test,
	}
	for k, v := range extra {
		files[k] = v
	}
	return testenv.WriteTree(t, files)
}

// TestPolicyTestPassesAndFails: passing cases count; a failing case is one
// line naming the file, the case and each differing field (expected vs
// got), and exits 1; the directory PATH finds *toolgate-test.yaml.
func TestPolicyTestPassesAndFails(t *testing.T) {
	dir := policyTestTree(t, testHeader+`now: "2029-06-01T00:00:00Z"
cases:
- name: bash is denied
  request: {tool_name: Bash, agent_id: bot}
  expect: {decision: deny, code: deny-bash, matchedRuleId: deny-bash, matchedPolicyVersion: 1.0}
- name: read runs
  request: {tool_name: Read, agent_id: bot}
  expect: {decision: allow, code: null, warnings: null}
- name: agent-7 is frozen until 2030
  request: {tool_name: Read, agent_id: agent-7}
  expect: {decision: deny, code: AGENT_FROZEN, reason: incident 42}
`, nil)
	o := run(t, "", "test", dir)
	if o.code != 0 || o.stdout != "3 passed, 0 failed\n" || o.stderr != "" {
		t.Fatalf("exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}

	// The same cases after the freeze expired: the file's clock decides,
	// as the sidecar's does.
	expired := policyTestTree(t, testHeader+`now: "2030-06-01T00:00:00Z"
cases:
- name: agent-7 is frozen until 2030
  request: {tool_name: Read, agent_id: agent-7}
  expect: {decision: deny, code: AGENT_FROZEN}
- name: bash is denied
  request: {tool_name: Bash}
  expect: {decision: allow, warnings: [x]}
`, nil)
	o = run(t, "", "test", expired)
	file := filepath.Join(expired, "shell.toolgate-test.yaml")
	want := file + `: "agent-7 is frozen until 2030": decision: expected "deny", got "allow"; code: expected "AGENT_FROZEN", got null` + "\n" +
		file + `: "bash is denied": decision: expected "allow", got "deny"; warnings: expected ["x"], got null` + "\n" +
		"0 passed, 2 failed\n"
	if o.code != exitcode.Problems || o.stdout != want {
		t.Errorf("exit %d, stdout:\n%s\nwant exit 1 and:\n%s", o.code, o.stdout, want)
	}
}

// TestPolicyTestJUnitAndCoverage: --junit writes a JUnit report CI
// systems read; --coverage names the rules no case matched.
func TestPolicyTestJUnitAndCoverage(t *testing.T) {
	dir := policyTestTree(t, testHeader+`cases:
- name: read runs
  request: {tool_name: Read}
  expect: {decision: allow}
- name: bash runs
  request: {tool_name: Bash}
  expect: {decision: allow}
`, nil)
	report := filepath.Join(t.TempDir(), "junit.xml")
	o := run(t, "", "test", filepath.Join(dir, "shell.toolgate-test.yaml"), "--junit", report, "--coverage")
	if o.code != exitcode.Problems || !strings.Contains(o.stdout, "1 passed, 1 failed") {
		t.Fatalf("exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	data, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tests    int `xml:"tests,attr"`
		Failures int `xml:"failures,attr"`
		Suites   []struct {
			Name  string `xml:"name,attr"`
			Cases []struct {
				Name    string `xml:"name,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("not XML: %v\n%s", err, data)
	}
	if doc.Tests != 2 || doc.Failures != 1 || len(doc.Suites) != 1 || doc.Suites[0].Name != "shell" ||
		doc.Suites[0].Cases[0].Failure != nil || doc.Suites[0].Cases[1].Failure == nil ||
		doc.Suites[0].Cases[1].Failure.Message != `decision: expected "allow", got "deny"` {
		t.Errorf("report:\n%s", data)
	}

	// deny-bash matched the failing case; a second rule no case reaches
	// is listed.
	cov := policyTestTree(t, testHeader+`cases:
- name: bash is denied
  request: {tool_name: Bash}
  expect: {decision: deny}
`, map[string]string{"policies/q.yaml": strings.ReplaceAll(fmt.Sprintf(denyBashPolicy, "-2"), "deny-bash", "deny-bash-too")})
	o = run(t, "", "test", cov, "--coverage")
	file := filepath.Join(cov, "shell.toolgate-test.yaml")
	if o.code != 0 || o.stdout != file+": rule no-bash-2/deny-bash-too: no case matched it\n1 passed, 0 failed\n" {
		t.Errorf("exit %d, stdout %q", o.code, o.stdout)
	}
}

// TestPolicyTestHistory: a usage history (JSON Lines or a JSON array, as
// eval --history) counts toward rate limits at the file's clock.
func TestPolicyTestHistory(t *testing.T) {
	limited := `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: limits}
spec:
  rules:
  - id: two-a-minute
    effect: deny
    when: {rateLimit: {max: 2, window: 1m, per: agent}}
`
	lines := `{"time":"2030-01-01T09:59:30Z","agent_id":"bot","tool_name":"Read"}
{"time":"2030-01-01T09:59:40Z","agent_id":"bot","tool_name":"Read"}
`
	dir := policyTestTree(t, testHeader+`now: "2030-01-01T10:00:00Z"
history: calls.jsonl
cases:
- name: the third call of a minute is denied
  request: {tool_name: Read, agent_id: bot}
  expect: {decision: deny, code: two-a-minute}
- name: another agent's first is not
  request: {tool_name: Read, agent_id: other}
  expect: {decision: allow}
`, map[string]string{"policies/limits.yaml": limited, "calls.jsonl": lines})
	if o := run(t, "", "test", dir); o.code != 0 || o.stdout != "2 passed, 0 failed\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
}

// TestPolicyTestResults: a request carrying output is a tool's result,
// judged by result rules only (as /v1/evaluate judges it), and a case may
// expect the output as delivered, the redactions and the explanations; a
// call rule never judges a result, nor a result rule a call.
func TestPolicyTestResults(t *testing.T) {
	results := `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: results}
spec:
  rules:
  - id: aws-keys
    phase: result
    effect: redact
    conditions:
    - {field: output.text, operator: detect, value: aws_access_key}
`
	dir := policyTestTree(t, testHeader+`cases:
- name: a key in a result is redacted
  request: {tool_name: Read, output: {text: "id=AKIAIOSFODNN7EXAMPLE", size: 23}}
  expect:
    decision: allow
    effect: redact
    matchedRuleId: aws-keys
    output: {text: "id=[REDACTED:aws-keys]", size: 23}
    redactions: [{start: 3, end: 23, policyId: results, ruleId: aws-keys}]
    explanations:
    - {policyId: results, ruleId: aws-keys, effect: redact, passed: true, score: 1, condition: 1,
       explanation: "condition 1: output.text contains an aws_access_key at byte 3 (20 bytes)"}
- name: the call rule does not judge a Bash result
  request: {tool_name: Bash, output: {text: "ok"}}
  expect: {decision: allow, effect: allow, matchedRuleId: null, redactions: null, output: null}
- name: the result rule does not judge a call
  request: {tool_name: Read, input: {path: AKIAIOSFODNN7EXAMPLE}}
  expect: {decision: allow, matchedRuleId: null, explanations: null}
`, map[string]string{"policies/results.yaml": results})
	if o := run(t, "", "test", dir, "--coverage"); o.code != 0 || !strings.HasSuffix(o.stdout, "3 passed, 0 failed\n") || !strings.Contains(o.stdout, "no-bash/deny-bash: no case matched it") {
		t.Errorf("exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
}

// TestPolicyTestRefusesUnreadableInput: exit 2, naming the file, the
// document's field, and what is wrong; nothing is reported as passed.
func TestPolicyTestRefusesUnreadableInput(t *testing.T) {
	ok := "cases:\n- name: c\n  request: {tool_name: Read}\n  expect: {decision: allow}\n"
	for _, c := range []struct {
		name, test string
		extra      map[string]string
		want       string
	}{
		{"unknown top-level field", testHeader + "namespaces: [a]\n" + ok, nil, `unknown field "namespaces"`},
		{"unknown case field", testHeader + "cases:\n- name: c\n  request: {tool_name: Read}\n  expect: {decision: allow}\n  expected: {decision: deny}\n", nil, `unknown field "expected"`},
		{"unknown expect field", testHeader + "cases:\n- name: c\n  request: {tool_name: Read}\n  expect: {verdict: allow}\n", nil, `cases[0] (c).expect.verdict: not a result field (want decision, effect,`},
		{"wrong apiVersion", strings.Replace(testHeader, "cli.toolgate.dev/v1alpha1", "toolgate.dev/v1alpha1", 1) + ok, nil, `apiVersion: "toolgate.dev/v1alpha1", want cli.toolgate.dev/v1alpha1`},
		{"wrong kind", strings.Replace(testHeader, "kind: Test", "kind: Tests", 1) + ok, nil, `kind: "Tests", want Test`},
		{"no manifests", "apiVersion: cli.toolgate.dev/v1alpha1\nkind: Test\n" + ok, nil, "manifests: name at least one file or directory"},
		{"no cases", testHeader, nil, "cases: none"},
		{"case without a name", testHeader + "cases:\n- request: {tool_name: Read}\n  expect: {decision: allow}\n", nil, "cases[0].name: required"},
		{"two cases of one name", testHeader + ok + "- name: c\n  request: {tool_name: Bash}\n  expect: {decision: deny}\n", nil, `cases[1].name: "c" is also cases[0]'s`},
		{"case without a request", testHeader + "cases:\n- name: c\n  expect: {decision: allow}\n", nil, "cases[0] (c).request: required"},
		{"request without tool_name", testHeader + "cases:\n- name: c\n  request: {agent_id: a}\n  expect: {decision: allow}\n", nil, "cases[0] (c).request: bad request: tool_name is required"},
		{"request with agentId", testHeader + "cases:\n- name: c\n  request: {tool_name: Read, agentId: a}\n  expect: {decision: allow}\n", nil, `cases[0] (c).request: bad request: unknown field "agentId": did you mean "agent_id"?`},
		{"output not an object", testHeader + "cases:\n- name: c\n  request: {tool_name: Read, output: leaked}\n  expect: {decision: allow}\n", nil, "cases[0] (c).request: bad request: output must be an object"},
		{"output.text not a string", testHeader + "cases:\n- name: c\n  request: {tool_name: Read, output: {text: 5}}\n  expect: {decision: allow}\n", nil, "cases[0] (c).request: bad request: output.text must be a string, not a number"},
		{"output with an unknown key", testHeader + "cases:\n- name: c\n  request: {tool_name: Read, output: {txt: a}}\n  expect: {decision: allow}\n", nil, `cases[0] (c).request: bad request: unknown output field "txt"`},
		{"case expecting nothing", testHeader + "cases:\n- name: c\n  request: {tool_name: Read}\n", nil, "cases[0] (c).expect: name at least one result field"},
		{"cases not a list", testHeader + "cases: {name: c}\n", nil, "cases: want []cli.testCase, not a object"},
		{"bad now", testHeader + "now: tomorrow\n" + ok, nil, `now: "tomorrow" is not an RFC 3339 time`},
		{"YAML syntax", testHeader + "cases: [\n", nil, "shell.toolgate-test.yaml:doc 1: yaml: line 5: did not find expected node content"},
		{"two documents", testHeader + ok + "---\n" + testHeader + ok, nil, "2 documents: one Test per file"},
		{"duplicate key", testHeader + "now: \"2030-01-01T00:00:00Z\"\nnow: \"2031-01-01T00:00:00Z\"\n" + ok, nil, `shell.toolgate-test.yaml:doc 1: yaml: unmarshal errors: line 6: key "now" already set in map`},
		{"empty file", "", nil, "0 documents: one Test per file"},
		{"manifest missing", strings.Replace(testHeader, "policies/", "nowhere/", 1) + ok, nil, "nowhere: cannot read: no such file or directory"},
		{"manifest from stdin", strings.Replace(testHeader, "[policies/]", "[\"-\"]", 1) + ok, nil, `manifests[0]: "-" is not a file or directory`},
		{"history missing", testHeader + "history: none.jsonl\n" + ok, nil, "history: cannot read: no such file or directory"},
		{"history malformed", testHeader + "history: h.jsonl\n" + ok, map[string]string{"h.jsonl": "{\"time\":\"2030-01-01T00:00:00Z\",\"tool_name\":\"Read\",\"agentid\":\"x\"}\n"}, `history h.jsonl: line 1: json: unknown field "agentid"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := policyTestTree(t, c.test, c.extra)
			o := run(t, "", "test", dir)
			file := filepath.Join(dir, "shell.toolgate-test.yaml")
			if o.code != exitcode.Usage || o.stdout != "" || !strings.Contains(o.stderr, "toolgate test: "+file) || !strings.Contains(o.stderr, c.want) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 naming %s with %q", o.code, o.stdout, o.stderr, file, c.want)
			}
		})
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"test"}, "toolgate test: name a test file or a directory of *toolgate-test.yaml files"},
		{[]string{"test", "/nonexistent/tests"}, "toolgate test: /nonexistent/tests: cannot read: no such file or directory"},
		{[]string{"test", t.TempDir()}, "no *toolgate-test.yaml file in this directory or below"},
		{[]string{"test", "--junit"}, "flag needs an argument: --junit"},
	} {
		if o := run(t, "", c.args...); o.code != exitcode.Usage || !strings.Contains(o.stderr, c.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 with %q", c.args, o.code, o.stderr, c.want)
		}
	}
}

// TestSamplesPolicyTest: the samples' own test file passes, with every
// rule of the samples matched by a case (what `make test` runs through
// the binary: make test-policies).
func TestSamplesPolicyTest(t *testing.T) {
	o := run(t, "", "test", samplesDir, "--coverage")
	if o.code != 0 || !strings.HasSuffix(o.stdout, " passed, 0 failed\n") || strings.Contains(o.stdout, "no case matched") {
		t.Errorf("exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
}
