package regodiff

import (
	"encoding/json"
	"testing"

	"github.com/toolgate/toolgate/engine"
)

// TestRegoResultRules (issue 28): OPA decides result evaluations (an input
// carrying output) as the engine does: result rules only there, call
// rules only for calls; no default deny or implicit deny for a result;
// redact between ask and warn, sticking like ask in an ordered policy and
// across levels; detect by each detector's pattern and check; a bundle
// whose enforcing policies have no result rule lets every result go on.
func TestRegoResultRules(t *testing.T) {
	result := func(r engine.Rule) engine.Rule { r.Phase = engine.PhaseResult; return r }
	text := func(op string, v any) engine.Condition {
		return engine.Condition{Field: "output.text", Operator: op, Value: jsonText(v)}
	}
	redactKeys := result(engine.Rule{ID: "redact-keys", Effect: "redact", Conditions: []engine.Condition{text("detect", "aws_access_key")}})
	denyCards := result(engine.Rule{ID: "deny-cards", Effect: "deny", Conditions: []engine.Condition{
		{Field: "output.text", Operator: "detect", Values: []json.RawMessage{jsonText("credit_card"), jsonText("iban")}}}})
	allowAfter := result(engine.Rule{ID: "allow-after", Effect: "allow"})
	warnBig := result(engine.Rule{ID: "warn-big", Effect: "warn", Conditions: []engine.Condition{{Field: "output.size", Operator: "gt", Value: jsonText(1000)}}})
	noBash := bashRule("no-rm", "deny", "rm")
	guard := defaultDeny(policy("guard", noBash, redactKeys, allowAfter, denyCards, warnBig))
	const (
		key     = `{"tool_name":"Read","agent_id":"bot","output":{"text":"id AKIAIOSFODNN7EXAMPLE ok","size":24}}`
		card    = `{"tool_name":"Read","agent_id":"bot","output":{"text":"4111 1111 1111 1111 and AKIAIOSFODNN7EXAMPLE"}}`
		badCard = `{"tool_name":"Read","agent_id":"bot","output":{"text":"4111 1111 1111 1112","size":2000}}`
		iban    = `{"tool_name":"Read","agent_id":"bot","output":{"text":"pay to GB82 WEST 1234 5698 7654 32"}}`
		plain   = `{"tool_name":"Read","agent_id":"bot","output":{"text":"nothing here"}}`
		rmCall  = `{"tool_name":"Bash","agent_id":"bot","input":{"command":"rm -rf /"}}`
		rmRes   = `{"tool_name":"Bash","agent_id":"bot","input":{"command":"rm -rf /"},"output":{"text":"done"}}`
	)
	tiered := engine.Policy{ID: "tiers", Version: 1, Evaluation: engine.EvaluationTiered, Rules: []engine.Rule{
		{ID: "read-ok", Effect: "allow", Targets: &engine.Targets{Tools: []string{"Read"}}},
		result(engine.Rule{ID: "redact-jwt", Effect: "redact", Priority: 1, Conditions: []engine.Condition{text("detect", "jwt")}}),
		result(engine.Rule{ID: "warn-email", Effect: "warn", Priority: 1, Conditions: []engine.Condition{text("detect", "email")}}),
		result(engine.Rule{ID: "deny-users", Effect: "deny", Targets: &engine.Targets{Resources: []engine.ResourceTarget{{Type: "table", Names: []string{"users"}}}},
			Conditions: []engine.Condition{text("contains", "@")}}),
		{ID: "orders-only", Effect: "allow", Targets: &engine.Targets{Resources: []engine.ResourceTarget{{Type: "table", Names: []string{"orders"}}}},
			Conditions: []engine.Condition{{Field: "input.sql", Operator: "starts_with", Value: jsonText("SELECT")}}},
	}}
	const (
		jwtMail = `{"tool_name":"Read","agent_id":"bot","output":{"text":"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk to jane@example.com"}}`
		orders  = `{"tool_name":"q","agent_id":"bot","resources":[{"type":"table","name":"orders"}],"input":{"sql":"DROP"}}`
		ordersR = `{"tool_name":"q","agent_id":"bot","resources":[{"type":"table","name":"orders"}],"input":{"sql":"DROP"},"output":{"text":"x"}}`
		usersR  = `{"tool_name":"q","agent_id":"bot","resources":[{"type":"table","name":"users"}],"output":{"text":"jane@example.com"}}`
	)
	callOnly := policy("calls", bashRule("no-rm", "deny", "rm"))
	decideLevelCases(t, []levelCase{
		{name: "redact: a result rule's detect finds a key", bundle: engine.Bundle{Policies: []engine.Policy{guard}},
			request: key, want: []string{`"decision":"allow","effect":"redact"`, `"matchedRuleId":"redact-keys"`}},
		{name: "a deny after a redact decides", bundle: engine.Bundle{Policies: []engine.Policy{guard}},
			request: card, want: []string{`"decision":"deny"`, `"matchedRuleId":"deny-cards"`}},
		{name: "a card failing Luhn is no card; warn, then the last allow", bundle: engine.Bundle{Policies: []engine.Policy{guard}},
			request: badCard, want: []string{`"matchedRuleId":"warn-big"`, `"warnings":[`}},
		{name: "mod-97", bundle: engine.Bundle{Policies: []engine.Policy{guard}},
			request: iban, want: []string{`"matchedRuleId":"deny-cards"`}},
		{name: "no default deny for a result", bundle: engine.Bundle{Policies: []engine.Policy{defaultDeny(policy("strict", redactKeys))}},
			request: plain, want: []string{`"decision":"allow"`, `"matchedRuleId":null`}, not: "deny"},
		{name: "call rules do not judge results", bundle: engine.Bundle{Policies: []engine.Policy{guard}},
			request: rmRes, want: []string{`"matchedRuleId":"allow-after"`}},
		{name: "result rules do not judge calls", bundle: engine.Bundle{Policies: []engine.Policy{guard}},
			request: rmCall, want: []string{`"matchedRuleId":"no-rm"`}},
		{name: "a bundle without result rules lets results go on", bundle: engine.Bundle{Policies: []engine.Policy{callOnly, defaultDeny(policy("strict", noBash))}},
			request: rmRes, want: []string{`"decision":"allow"`}},
		{name: "tiered: redact outranks warn", bundle: engine.Bundle{Policies: []engine.Policy{tiered}},
			request: jwtMail, want: []string{`"effect":"redact"`, `"matchedRuleId":"redact-jwt"`}, not: "warnings"},
		{name: "tiered: no implicit deny for a result", bundle: engine.Bundle{Policies: []engine.Policy{tiered}},
			request: ordersR, not: "IMPLICIT_DENY"},
		{name: "tiered: the call's implicit deny", bundle: engine.Bundle{Policies: []engine.Policy{tiered}},
			request: orders, want: []string{`"code":"IMPLICIT_DENY"`}},
		{name: "tiered: a result rule bound to a resource", bundle: engine.Bundle{Policies: []engine.Policy{tiered}},
			request: usersR, want: []string{`"matchedRuleId":"deny-users"`}},
		{name: "levels: the cluster's redact over the namespace's allow", bundle: engine.Bundle{Policies: []engine.Policy{
			cluster(policy("org", redactKeys)), policy("team", allowAfter)}},
			request: key, want: []string{`"matchedPolicyKind":"ClusterPolicy"`, `"effect":"redact"`}},
		{name: "an Audit policy's result verdict, and one without result rules", bundle: engine.Bundle{Policies: []engine.Policy{
			policy("team", allowAfter), audit(policy("candidate", denyCards)), audit(policy("calls-only", noBash))}},
			request: card, want: []string{`"shadow":[{"policy":"calls-only","decision":"allow"},{"policy":"candidate","decision":"deny","rule":"deny-cards"}]`}},
		{name: "redact on a call rule does not compile", bundle: engine.Bundle{Policies: []engine.Policy{
			policy("bad", engine.Rule{ID: "r", Effect: "redact"})}},
			request: rmCall, want: []string{`"code":"POLICY_COMPILE_ERROR"`}},
	})
}
