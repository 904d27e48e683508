package sidecar

import (
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
)

// guardrailsBundle: a ClusterPolicy denying rm -rf, the namespace's allow
// of every shell command, an exception for migration-bot, and an Audit
// policy denying curl.
func guardrailsBundle(expires time.Time) engine.Bundle {
	shell := engine.Rule{ID: "any-shell", Effect: "allow", Conditions: []engine.Condition{
		{Field: "tool_name", Operator: "eq", Value: []byte(`"Bash"`)}}}
	rmrf := engine.Rule{ID: "no-rm-rf", Effect: "deny", Conditions: []engine.Condition{
		{Field: "tool_name", Operator: "eq", Value: []byte(`"Bash"`)},
		{Field: "input.command", Operator: "contains", Value: []byte(`"rm -rf"`)}}}
	curl := engine.Rule{ID: "no-curl", Effect: "deny", Conditions: []engine.Condition{
		{Field: "input.command", Operator: "starts_with", Value: []byte(`"curl"`)}}}
	return engine.Bundle{
		Policies: []engine.Policy{
			{ID: "org-guardrails", Version: 1, Kind: engine.KindClusterPolicy, Rules: []engine.Rule{rmrf}},
			{ID: "team-shell", Version: 1, Rules: []engine.Rule{shell}},
			{ID: "no-curl-candidate", Version: 1, Mode: engine.ModeAudit, Rules: []engine.Rule{curl}},
		},
		Exceptions: []engine.Exception{{Name: "storage-migration", PolicyKind: engine.KindClusterPolicy, Policy: "org-guardrails",
			RuleIDs: []string{"no-rm-rf"}, AgentIDs: []string{"migration-bot"}, ExpiresAt: expires}},
	}
}

// Through the real sidecar: a namespace allow does not loosen the
// ClusterPolicy, the exception applies and says so, and an Audit policy
// changes no decision but is in the answer, the decision log and
// toolgate_sidecar_shadow_decisions_total.
func TestSidecarDecidesLevelsExceptionsAndShadow(t *testing.T) {
	o := testOptions()
	logs := &lineBuffer{}
	o.DecisionLog, o.DecisionLogWriter = DecisionLogStdout, logs
	s, base := newTestServer(t, o)
	doc, _ := encode(t, guardrailsBundle(time.Now().Add(time.Hour)))
	if err := s.LoadDocument(doc, false); err != nil {
		t.Fatal(err)
	}
	d := evaluate(t, base, `{"tool_name":"Bash","agent_id":"bot","input":{"command":"rm -rf /"}}`)
	if d.Decision != engine.Deny || d.MatchedPolicyKind != engine.KindClusterPolicy || d.MatchedRuleID != "no-rm-rf" {
		t.Fatalf("rm -rf: %+v", d.Result)
	}
	d = evaluate(t, base, `{"tool_name":"Bash","agent_id":"migration-bot","input":{"command":"rm -rf /old"}}`)
	if d.Decision != engine.Allow || d.ExceptionApplied != "storage-migration" {
		t.Fatalf("exempted: %+v", d.Result)
	}
	want := []engine.ShadowVerdict{{Policy: "no-curl-candidate", Decision: engine.Deny, Rule: "no-curl"}}
	for i := range 2 {
		d = evaluate(t, base, `{"tool_name":"Bash","agent_id":"bot","input":{"command":"curl example.com"}}`)
		if d.Decision != engine.Allow || d.MatchedRuleID != "any-shell" || !reflect.DeepEqual(d.Shadow, want) {
			t.Fatalf("curl %d: %+v", i, d.Result)
		}
	}
	status, body := get(t, base+"/metrics")
	if status != http.StatusOK {
		t.Fatalf("metrics: %d", status)
	}
	for _, line := range []string{
		`toolgate_sidecar_shadow_decisions_total{decision="deny",policy="no-curl-candidate"} 2`,
		`toolgate_sidecar_shadow_decisions_total{decision="allow",policy="no-curl-candidate"} 2`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("metrics lack %s", line)
		}
	}
	_ = s.Close(t.Context())
	lines := logs.lines(t)
	if len(lines) != 4 {
		t.Fatalf("%d log lines, want 4:\n%s", len(lines), logs)
	}
	if lines[0]["matched_policy_kind"] != engine.KindClusterPolicy || lines[1]["exception_applied"] != "storage-migration" {
		t.Errorf("log lines: %v\n%v", lines[0], lines[1])
	}
	if got := fmt.Sprint(lines[2]["shadow"]); got != "[map[decision:deny policy:no-curl-candidate rule:no-curl]]" {
		t.Errorf("logged shadow: %s", got)
	}
}
