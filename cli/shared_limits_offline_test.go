package cli

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
)

// sharedLimitsPolicy (issue 30) denies a third pay a minute across the
// namespace (counted by each sidecar), and a third Read a minute per
// agent shared by every replica (failOpen).
const sharedLimitsPolicy = `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: limits}
spec:
  rules:
  - id: namespace-pay
    effect: deny
    targets: {tools: [pay]}
    when: {rateLimit: {max: 2, window: 1m, per: namespace}}
  - id: shared-read
    effect: deny
    targets: {tools: [Read]}
    when: {rateLimit: {max: 2, window: 1m, store: shared, failOpen: true}}
`

// TestEvalHistoryCountsSharedAndNamespaceLimits: toolgate eval --history
// counts a per-namespace limit over every agent of the history, and a
// shared limit as one counter for the history (as a local one: there is
// no store offline).
func TestEvalHistoryCountsSharedAndNamespaceLimits(t *testing.T) {
	history := `[{"time":"2030-01-31T09:59:10Z","agent_id":"a","tool_name":"pay"},
{"time":"2030-01-31T09:59:20Z","agent_id":"b","tool_name":"pay"},
{"time":"2030-01-31T09:59:30Z","agent_id":"a","tool_name":"Read"},
{"time":"2030-01-31T09:59:40Z","agent_id":"a","tool_name":"Read"},
{"time":"2030-01-31T09:59:50Z","agent_id":"b","tool_name":"Read"}]`
	dir := testenv.WriteTree(t, map[string]string{"p.yaml": sharedLimitsPolicy, "history.json": history})
	for _, tc := range []struct{ name, req, rule string }{
		{"a third pay in the namespace, by a new agent", `{"tool_name":"pay","agent_id":"c"}`, "namespace-pay"},
		{"a third Read by a", `{"tool_name":"Read","agent_id":"a"}`, "shared-read"},
		{"a second Read by b", `{"tool_name":"Read","agent_id":"b"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := oneResult(t, run(t, tc.req, "eval", "-f", filepath.Join(dir, "p.yaml"), "--request", "-",
				"--history", filepath.Join(dir, "history.json"), "--now", historyNow))
			if res.MatchedRuleID != tc.rule {
				t.Errorf("%+v, want rule %q", res, tc.rule)
			}
			if tc.rule == "" && res.Decision != engine.Allow {
				t.Errorf("%+v, want allow", res)
			}
		})
	}
}

// TestPolicyTestAndReplayCountSharedAndNamespaceLimits: toolgate test (with
// a history) and toolgate replay count them the same way.
func TestPolicyTestAndReplayCountSharedAndNamespaceLimits(t *testing.T) {
	lines := `{"time":"2030-01-01T09:59:30Z","agent_id":"a","tool_name":"pay"}
{"time":"2030-01-01T09:59:40Z","agent_id":"b","tool_name":"pay"}
{"time":"2030-01-01T09:59:50Z","agent_id":"a","tool_name":"Read"}
{"time":"2030-01-01T09:59:55Z","agent_id":"a","tool_name":"Read"}
`
	dir := policyTestTree(t, testHeader+`now: "2030-01-01T10:00:00Z"
history: calls.jsonl
cases:
- name: a third pay in the namespace is denied, whoever makes it
  request: {tool_name: pay, agent_id: c}
  expect: {decision: deny, code: namespace-pay}
- name: a third shared Read by a is denied
  request: {tool_name: Read, agent_id: a}
  expect: {decision: deny, code: shared-read}
- name: b's first Read is not
  request: {tool_name: Read, agent_id: b}
  expect: {decision: allow}
`, map[string]string{"policies/limits.yaml": sharedLimitsPolicy, "calls.jsonl": lines})
	if o := run(t, "", "test", dir); o.code != 0 || o.stdout != "3 passed, 0 failed\n" {
		t.Errorf("toolgate test: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}

	line := func(sec int, agent, tool string) string {
		return fmt.Sprintf(`{"time":"2030-01-01T10:00:%02dZ","decision_id":"d-%d","session_id":null,"agent_id":%q,"tool_name":%q,"decision":"allow","effect":"allow","matched_policy_id":null,"matched_policy_version":null,"matched_rule_id":null,"bundle_revision":null,"latency_ms":0.01}`, sec, sec, agent, tool)
	}
	log := strings.Join([]string{line(1, "a", "pay"), line(2, "b", "pay"), line(3, "c", "pay"),
		line(4, "a", "Read"), line(5, "b", "Read"), line(6, "a", "Read"), line(7, "a", "Read")}, "\n") + "\n"
	policies := testenv.WriteTree(t, map[string]string{"limits.yaml": sharedLimitsPolicy})
	o := run(t, log, "replay", "-f", policies)
	for _, want := range []string{"7 decisions replayed, 2 would change\n",
		"allow -> deny by namespace-pay (before: the default): 1\n    2030-01-01T10:00:03Z d-3 pay agent=c\n",
		"allow -> deny by shared-read (before: the default): 1\n    2030-01-01T10:00:07Z d-7 Read agent=a\n"} {
		if o.code != 0 || !strings.Contains(o.stdout, want) {
			t.Errorf("replay: exit %d, stdout:\n%s\nwant it to contain:\n%s\nstderr %s", o.code, o.stdout, want, o.stderr)
		}
	}
}
