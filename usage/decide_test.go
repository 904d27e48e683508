package usage

import (
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
)

// TestDecideCountsAllowedCallsWhileTheBundleHasLimits: with a limit, each
// allowed call is counted at the decision's clock and the limit holds at
// max; a denied call is not counted; without limits nothing is.
func TestDecideCountsAllowedCallsWhileTheBundleHasLimits(t *testing.T) {
	compile := func(rules ...engine.Rule) *engine.Compiled {
		c, diags := engine.Compile(engine.Bundle{Policies: []engine.Policy{{ID: "p", Version: 1, Rules: rules}}})
		if len(diags) > 0 {
			t.Fatal(diags)
		}
		return c
	}
	limited := compile(engine.Rule{ID: "cap", Effect: "deny", Targets: &engine.Targets{Tools: []string{"pay"}},
		When: &engine.When{RateLimit: &engine.Limit{Max: 2, Window: "1h"}}})
	plain := compile(engine.Rule{ID: "all", Effect: "allow"})
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	opts := engine.EvalOptions{Now: func() time.Time { return now }}
	req := engine.Request{"tool_name": "pay", "agent_id": "a"}
	agent, _ := engine.UsageKeys(req)

	l, err := New(DefaultMaxKeys, DefaultMaxEventsPerKey)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := l.Decide(plain, req, opts); err != nil {
			t.Fatal(err)
		}
	}
	if got := l.Calls(agent, "pay", time.Hour, now); got != 0 {
		t.Fatalf("without limits %d calls were counted, want 0", got)
	}
	var decisions []engine.Decision
	for range 3 {
		res, err := l.Decide(limited, req, opts)
		if err != nil {
			t.Fatal(err)
		}
		decisions = append(decisions, res.Decision)
	}
	if decisions[0] != engine.Allow || decisions[1] != engine.Allow || decisions[2] != engine.Deny {
		t.Fatalf("decisions %v, want allow allow deny", decisions)
	}
	if got := l.Calls(agent, "pay", time.Hour, now); got != 2 {
		t.Fatalf("%d calls counted, want the 2 allowed", got)
	}
}
