package decide

import (
	"slices"
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
)

// TestRegisteredBindingReplacesEveryClaim: with a bundle that registers
// the namespace's agents, what a request (and the sidecar's arguments)
// claim of agent_id, roles and environment is replaced by the Agent's;
// without an environment label the request's own is removed, so it can
// match no rule about environments. Without registration the arguments
// bind, as before.
func TestRegisteredBindingReplacesEveryClaim(t *testing.T) {
	d, err := NewInProcess(Config{AgentID: "boss", Roles: []string{"payments"}, Environment: "dev", ServiceAccount: "billing-bot"})
	if err != nil {
		t.Fatal(err)
	}
	allow := engine.Policy{ID: "p", Version: 1, DefaultEffect: "allow", Rules: []engine.Rule{{ID: "all", Effect: "allow"}}}
	serve := func(id *engine.Identity) {
		c, _ := engine.Compile(engine.Bundle{Policies: []engine.Policy{allow}, Identity: id})
		d.Serve(c, "r", "test", time.Now())
	}
	claim := func() engine.Request {
		return engine.Request{"tool_name": "t", "agent_id": "someone", "roles": []any{"admin"}, "environment": "staging"}
	}

	serve(nil)
	req := claim()
	d.Decide(req, false, nil)
	if req["agent_id"] != "boss" || !slices.Equal(req["roles"].([]any), []any{"payments"}) || req["environment"] != "dev" {
		t.Errorf("arguments bind: %v", req)
	}

	serve(&engine.Identity{Agents: []engine.Agent{{Name: "billing", ServiceAccount: "billing-bot", ID: "billing-bot-7", Roles: []string{}}}})
	req = claim()
	if res, _ := d.Decide(req, false, nil); res.Decision != engine.Allow {
		t.Fatalf("registered agent: %+v", res)
	}
	if _, has := req["environment"]; has || req["agent_id"] != "billing-bot-7" || len(req["roles"].([]any)) != 0 {
		t.Errorf("registered, no environment label: %v, want agent billing-bot-7, no roles, no environment", req)
	}
	if a := d.State().Agent(); a == nil || a.Name != "billing" {
		t.Errorf("State().Agent() = %+v", a)
	}

	d.SetServiceAccount("rogue")
	req = claim()
	if res, _ := d.Decide(req, false, nil); res.Code != engine.CodeAgentUnregistered {
		t.Errorf("unregistered ServiceAccount: %+v, want AGENT_UNREGISTERED", res)
	}
	if !d.Frozen(engine.Request{}) {
		t.Error("an unregistered agent's tool lists are not hidden (Frozen)")
	}
	if err := d.State().CheckUpstream("github", "http://x"); err == nil {
		t.Error("an unregistered agent may reach an upstream")
	}
}
