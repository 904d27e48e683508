package sidecar

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/mcptest"
)

// registeredBundle is mcptest's bundle plus rules that read identity, in a
// namespace that registers its agents: Agent "billing" is ServiceAccount
// billing-bot, agent billing-bot-7, role reader, upstream pay at payURL;
// the namespace is prod.
func registeredBundle(payURL string) engine.Bundle {
	b := mcptest.Bundle()
	b.Policies = append(b.Policies, engine.Policy{ID: "identity", Version: 1, Priority: 10, DefaultEffect: "allow", Rules: []engine.Rule{
		{ID: "payments-role-only", Effect: "deny", Conditions: []engine.Condition{
			{Field: "tool_name", Operator: "eq", Value: raw("refund")},
			{Field: "roles", Operator: "not_contains", Value: raw("payments")}}},
		{ID: "no-shell-in-prod", Effect: "deny", Conditions: []engine.Condition{
			{Field: "tool_name", Operator: "eq", Value: raw("Bash")},
			{Field: "environment", Operator: "neq", Value: raw("dev")}}},
	}})
	b.Identity = &engine.Identity{Environment: "prod",
		Agents:    []engine.Agent{{Name: "billing", ServiceAccount: "billing-bot", ID: "billing-bot-7", Roles: []string{"reader"}, Upstreams: []string{"pay"}}},
		Upstreams: []engine.Upstream{{Name: "pay", URL: payURL}}}
	return b
}

// TestAttackRegisteredIdentityIgnoresArgumentsAndRequests: in a namespace
// that registers its agents, a sidecar whose arguments claim another
// agent id, a privileged role and another environment (what a Pod's author
// or a hand-written sidecar would set), asked by a request that claims
// them too, decides as the Agent registered for its ServiceAccount: before,
// the arguments bound the identity and `payments`/`dev` passed.
func TestAttackRegisteredIdentityIgnoresArgumentsAndRequests(t *testing.T) {
	rig := startMCPRig(t, "http://127.0.0.1:1/mcp", registeredBundle("http://127.0.0.1:1/mcp"), func(o *Options) {
		o.AgentID, o.Roles, o.Environment, o.ServiceAccount = "boss", []string{"payments"}, "dev", "billing-bot"
	})
	claims := `"agent_id":"boss","roles":["payments"],"environment":"dev"`
	refund := evaluate(t, rig.decisions, `{"tool_name":"refund",`+claims+`}`)
	if refund.Decision != engine.Deny || refund.MatchedRuleID != "payments-role-only" {
		t.Errorf("refund claiming role payments: %+v, want deny payments-role-only (the Agent's roles are [reader])", refund.Result)
	}
	shell := evaluate(t, rig.decisions, `{"tool_name":"Bash",`+claims+`}`)
	if shell.Decision != engine.Deny || shell.MatchedRuleID != "no-shell-in-prod" {
		t.Errorf("Bash claiming environment dev: %+v, want deny no-shell-in-prod (the namespace is prod)", shell.Result)
	}
	// A freeze of the registered agent id stops it, whatever it claims.
	b := registeredBundle("http://127.0.0.1:1/mcp")
	b.FrozenAgents = []engine.FrozenAgent{{ID: "billing-bot-7", Reason: "INC-24"}}
	rig.publish(b)
	if d := evaluate(t, rig.decisions, `{"tool_name":"read_file",`+claims+`}`); d.Code != engine.CodeAgentFrozen {
		t.Errorf("frozen registered agent claiming agent_id boss: %+v, want AGENT_FROZEN", d.Result)
	}
	// The decision log names the registered agent and what was claimed.
	var seen bool
	for _, l := range rig.logs.lines(t) {
		if l["agent_id"] == "billing-bot-7" && l["requested_agent_id"] == "boss" {
			seen = true
		}
	}
	if !seen {
		t.Errorf("no decision log line for agent billing-bot-7 noting the claimed boss:\n%s", rig.logs.String())
	}
}

// TestAttackUnregisteredServiceAccountDeniesEverything: a sidecar running
// as a ServiceAccount no Agent registers (an editor's new ServiceAccount)
// denies every call AGENT_UNREGISTERED, whatever agent id its arguments
// and requests claim, and its proxy lists no tools.
func TestAttackUnregisteredServiceAccountDeniesEverything(t *testing.T) {
	rig := startMCPRig(t, "http://127.0.0.1:1/mcp", registeredBundle("http://127.0.0.1:1/mcp"), func(o *Options) {
		o.AgentID, o.ServiceAccount = "billing-bot-7", "rogue"
	})
	for _, tool := range []string{"read_file", "Bash", "refund"} {
		d := evaluate(t, rig.decisions, `{"tool_name":"`+tool+`","agent_id":"billing-bot-7"}`)
		if d.Decision != engine.Deny || d.Code != engine.CodeAgentUnregistered || !strings.Contains(d.Reason, `"rogue"`) {
			t.Errorf("%s as unregistered rogue: %+v, want deny AGENT_UNREGISTERED naming the ServiceAccount", tool, d.Result)
		}
	}
}

// TestAttackProxyRefusesUpstreamNotRegistered: in a namespace that
// registers its upstreams, a sidecar whose --mcp-upstream renames the
// registered upstream, points it elsewhere, or names one the Agent does
// not list, forwards nothing to it: every request is 403, and the
// upstream counts no call. The registered one at its URL works.
func TestAttackProxyRefusesUpstreamNotRegistered(t *testing.T) {
	up := startMCPServer(t)
	registered := up.endpoint("2025-11-25")
	for _, c := range []struct {
		name, upstream string
		bundle         engine.Bundle
	}{
		{"pointed elsewhere", "pay=" + up.base + "/mcp-stateless", registeredBundle(registered)},
		{"renamed", "pay=" + registered, func() engine.Bundle {
			b := registeredBundle(registered)
			b.Identity.Upstreams[0].Name = "payments"
			b.Identity.Agents[0].Upstreams = []string{"payments"}
			return b
		}()},
		{"not the agent's", "pay=" + registered, func() engine.Bundle {
			b := registeredBundle(registered)
			b.Identity.Agents[0].Upstreams = nil
			return b
		}()},
	} {
		t.Run(c.name, func(t *testing.T) {
			rig := startMCPRig(t, registered, c.bundle, func(o *Options) {
				o.ServiceAccount = "billing-bot"
				o.MCP.Upstreams = []string{c.upstream}
			})
			status, body := post(t, rig.proxy, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","arguments":{"amount":5}}}`)
			if status != http.StatusForbidden || !strings.Contains(string(body), "refused") {
				t.Errorf("tools/call: %d %s, want 403 refused", status, body)
			}
			var msg struct {
				Error struct{ Code int } `json:"error"`
			}
			if err := json.Unmarshal(body, &msg); err != nil || msg.Error.Code != -32004 {
				t.Errorf("answer %s is not the JSON-RPC error -32004 (%v)", body, err)
			}
			if n := up.stats(t).Calls["pay"]; n != 0 {
				t.Errorf("the upstream ran pay %d times", n)
			}
		})
	}
	t.Run("registered", func(t *testing.T) {
		rig := startMCPRig(t, registered, registeredBundle(registered), func(o *Options) { o.ServiceAccount = "billing-bot" })
		cs := rig.connect("2025-11-25", nil, nil)
		if res := callTool(t, cs, "pay", map[string]any{"amount": 5}); res.IsError {
			t.Errorf("pay through the registered upstream: %+v", res)
		}
		if n := up.stats(t).Calls["pay"]; n != 1 {
			t.Errorf("the upstream ran pay %d times, want 1", n)
		}
	})
}
