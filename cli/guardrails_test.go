package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/manifest"
)

const guardrails = "../config/guardrails"

func writeRequest(t *testing.T, doc string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "request.json")
	if err := os.WriteFile(p, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// --namespace-labels is what ClusterPolicies' selectors see offline: the
// guardrail applies in a namespace it selects, and not elsewhere.
func TestEvalNamespaceLabelsSelectClusterPolicies(t *testing.T) {
	req := writeRequest(t, `{"tool_name":"Bash","agent_id":"bot","input":{"command":"rm -rf /data"}}`)
	base := []string{"eval", "-f", guardrails, "-n", "payments", "--request", req, "--now", "2026-12-01T10:00:00Z"}
	r := oneResult(t, run(t, "", append(base, "--namespace-labels", "team=payments,tier=1")...))
	if r.Decision != engine.Deny || r.MatchedPolicyKind != engine.KindClusterPolicy || r.MatchedRuleID != "no-rm-rf" {
		t.Fatalf("selected namespace: %+v", r)
	}
	r = oneResult(t, run(t, "", append(base, "--namespace-labels", "team=search")...))
	if r.Decision != engine.Allow || r.MatchedRuleID != "any-shell" {
		t.Fatalf("namespace not selected: %+v", r)
	}
	r = oneResult(t, run(t, "", base...))
	if r.Decision != engine.Allow {
		t.Fatalf("no labels given: the selector of team=payments selects nothing: %+v", r)
	}
}

func TestNamespaceLabelsFlagRejectsMalformed(t *testing.T) {
	req := writeRequest(t, `{"tool_name":"Bash"}`)
	for _, bad := range []string{"team", "team=pay ments", "=x", "a=b,a", strings.Repeat("k", 64) + "=v"} {
		o := run(t, "", "eval", "-f", guardrails, "--request", req, "--namespace-labels", bad)
		if o.code != 2 || !strings.Contains(o.stderr, "--namespace-labels") || !strings.Contains(o.stderr, "KEY=VALUE") {
			t.Errorf("--namespace-labels %q: exit %d, stderr %q", bad, o.code, o.stderr)
		}
	}
}

// A ClusterPolicy whose selector does not parse is refused offline as the
// webhook refuses it (the API server's schema does not check operators).
func TestValidateRefusesBadClusterPolicySelector(t *testing.T) {
	dir := t.TempDir()
	doc := `apiVersion: toolgate.dev/v1alpha1
kind: ClusterPolicy
metadata: {name: bad-selector, namespace: ignored}
spec:
  namespaceSelector:
    matchExpressions: [{key: team, operator: Bogus, values: [x]}]
  rules: [{id: r, effect: deny}]
`
	if err := os.WriteFile(filepath.Join(dir, "cp.yaml"), []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	o := run(t, "", "validate", "-f", dir)
	if o.code != 1 || !strings.Contains(o.stdout, "ClusterPolicy/bad-selector: spec.namespaceSelector") || !strings.Contains(o.stdout, `"Bogus" is not a valid label selector operator`) {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", o.code, o.stdout, o.stderr)
	}
}

// Exception expiry is the engine's, at the clock each reader is given: the
// sidecar's decision core and toolgate eval decide alike just before and at
// expiresAt.
func TestExceptionExpirySidecarAndCLIAgree(t *testing.T) {
	const doc = `{"tool_name":"Bash","agent_id":"migration-bot","input":{"command":"rm -rf /old-volume"}}`
	labels := map[string]string{"team": "payments"}
	expires := time.Date(2026, 12, 15, 0, 0, 0, 0, time.UTC)
	for _, at := range []time.Time{expires.Add(-time.Second), expires, expires.Add(time.Hour)} {
		// The bundle as the operator publishes it an hour earlier, with
		// the exception still in it: the sidecar must lift it by itself.
		_, b, err := manifest.LoadNamespaceBundle([]string{guardrails}, nil, "payments", labels, expires.Add(-time.Hour))
		if err != nil || len(b.Exceptions) != 1 {
			t.Fatalf("bundle: %v %+v", err, b.Exceptions)
		}
		c, _ := engine.Compile(b)
		clock := at
		d, err := decide.NewInProcess(decide.Config{Now: func() time.Time { return clock }})
		if err != nil {
			t.Fatal(err)
		}
		d.Serve(c, b.Revision, "test", at)
		req, err := engine.DecodeRequest([]byte(doc))
		if err != nil {
			t.Fatal(err)
		}
		sidecar, _ := d.Decide(req, false, nil)
		cli := oneResult(t, run(t, "", "eval", "-f", guardrails, "-n", "payments", "--namespace-labels", "team=payments",
			"--request", writeRequest(t, doc), "--now", at.Format(time.RFC3339Nano)))
		inForce := at.Before(expires)
		for name, r := range map[string]engine.Result{"sidecar": sidecar, "eval": cli} {
			if (r.Decision == engine.Allow) != inForce || (r.ExceptionApplied == "storage-migration") != inForce {
				t.Errorf("%s at %s (exception in force: %v): %+v", name, at, inForce, r)
			}
		}
	}
}

// replay decides again as the ServiceAccount the sidecar logged: an
// exception naming it applies to the lines it wrote.
func TestReplayUsesLoggedServiceAccount(t *testing.T) {
	dir := t.TempDir()
	manifests := `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: p, namespace: ns}
spec:
  rules: [{id: no-rm-rf, effect: deny, conditions: [{field: input.command, operator: contains, value: "rm -rf"}]}]
---
apiVersion: toolgate.dev/v1alpha1
kind: PolicyException
metadata: {name: cleaner-may, namespace: ns}
spec:
  policyRef: {kind: Policy, name: p}
  ruleIds: [no-rm-rf]
  agents: {serviceAccounts: [cleaner]}
  expiresAt: "2026-12-02T00:00:00Z"
  justification: test
`
	if err := os.WriteFile(filepath.Join(dir, "m.yaml"), []byte(manifests), 0o600); err != nil {
		t.Fatal(err)
	}
	line := func(sa string) string {
		return `{"time":"2026-12-01T10:00:00Z","decision_id":"d","session_id":null,"agent_id":"bot","service_account":"` + sa +
			`","tool_name":"Bash","decision":"deny","effect":"deny","code":"no-rm-rf","matched_policy_id":"p","matched_policy_version":1,"matched_rule_id":"no-rm-rf","bundle_revision":null,"latency_ms":0.1,"request":{"input":{"command":"rm -rf /"}}}` + "\n"
	}
	o := run(t, line("cleaner")+line("other"), "replay", "-f", dir, "-o", "json")
	if o.code != 0 || !strings.Contains(o.stdout, `"changed":1`) {
		t.Fatalf("exit %d\nstdout %s\nstderr %s", o.code, o.stdout, o.stderr)
	}
	o = run(t, `{"time":"2026-12-01T10:00:00Z","tool_name":"Bash","decision":"deny","service_account":7}`+"\n", "replay", "-f", dir)
	if o.code != 2 || !strings.Contains(o.stderr, "service_account must be a string") {
		t.Fatalf("malformed service_account: exit %d, stderr %s", o.code, o.stderr)
	}
}

// The ServiceAccount a sidecar runs as, offline: eval --service-account and
// a test case's serviceAccount make exceptions and freezes naming it apply;
// a name that is not a ServiceAccount's is refused.
func TestServiceAccountOffline(t *testing.T) {
	dir := t.TempDir()
	manifests := `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: p}
spec:
  rules: [{id: no-rm-rf, effect: deny, conditions: [{field: input.command, operator: contains, value: "rm -rf"}]}]
---
apiVersion: toolgate.dev/v1alpha1
kind: PolicyException
metadata: {name: cleaner-may}
spec:
  policyRef: {kind: Policy, name: p}
  ruleIds: [no-rm-rf]
  agents: {serviceAccounts: [cleaner]}
  expiresAt: "2026-12-02T00:00:00Z"
  justification: test
`
	testFile := `apiVersion: cli.toolgate.dev/v1alpha1
kind: Test
metadata: {name: sa}
manifests: [m.yaml]
now: "2026-12-01T10:00:00Z"
cases:
- name: as cleaner
  serviceAccount: cleaner
  request: {tool_name: Bash, input: {command: "rm -rf /"}}
  expect: {decision: allow, exceptionApplied: cleaner-may}
- name: as anyone else
  request: {tool_name: Bash, input: {command: "rm -rf /"}}
  expect: {decision: deny, exceptionApplied: null}
`
	for name, doc := range map[string]string{"m.yaml": manifests, "sa.toolgate-test.yaml": testFile} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(doc), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if o := run(t, "", "test", dir); o.code != 0 || !strings.Contains(o.stdout, "2 passed, 0 failed") {
		t.Fatalf("toolgate test: exit %d\n%s\n%s", o.code, o.stdout, o.stderr)
	}
	req := writeRequest(t, `{"tool_name":"Bash","input":{"command":"rm -rf /"}}`)
	r := oneResult(t, run(t, "", "eval", "-f", filepath.Join(dir, "m.yaml"), "--request", req, "--now", "2026-12-01T10:00:00Z", "--service-account", "cleaner"))
	if r.Decision != engine.Allow || r.ExceptionApplied != "cleaner-may" {
		t.Fatalf("eval --service-account cleaner: %+v", r)
	}
	if o := run(t, "", "eval", "-f", filepath.Join(dir, "m.yaml"), "--request", req, "--service-account", "Not_A_Name"); o.code != 2 || !strings.Contains(o.stderr, "--service-account") {
		t.Fatalf("bad --service-account: exit %d, %s", o.code, o.stderr)
	}
	bad := strings.Replace(testFile, "serviceAccount: cleaner", "serviceAccount: Not_A_Name", 1)
	if err := os.WriteFile(filepath.Join(dir, "sa.toolgate-test.yaml"), []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	if o := run(t, "", "test", dir); o.code != 2 || !strings.Contains(o.stderr, "cases[0] (as cleaner).serviceAccount") {
		t.Fatalf("bad serviceAccount in a test file: exit %d\n%s", o.code, o.stderr)
	}
}
