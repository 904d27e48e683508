package decide

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/engine"
)

// untouchable is an Approvals no test path may reach: each method fails
// the test. It stands where a store would be, to show a call is refused
// before anything is asked.
type untouchable struct{ t *testing.T }

func (u untouchable) Ask(context.Context, *approval.Call) (approval.Ticket, error) {
	u.t.Fatal("Ask was reached")
	return approval.Ticket{}, nil
}
func (u untouchable) Status(string, *approval.Call) approval.Status {
	u.t.Fatal("Status was reached")
	return approval.Status{}
}
func (u untouchable) Changed() <-chan struct{} { u.t.Fatal("Changed was reached"); return nil }
func (u untouchable) WaitSynced(context.Context) error {
	u.t.Fatal("WaitSynced was reached")
	return nil
}
func (u untouchable) Consume(context.Context, string) error {
	u.t.Fatal("Consume was reached")
	return nil
}

func askingDecider(t *testing.T, sa string) *Decider {
	t.Helper()
	d, err := NewInProcess(Config{ServiceAccount: sa})
	if err != nil {
		t.Fatal(err)
	}
	c, diags := engine.Compile(engine.Bundle{Policies: []engine.Policy{{ID: "payments", Version: 1, Rules: []engine.Rule{
		{ID: "pay-cap", Effect: "ask", Conditions: []engine.Condition{{Field: "tool_name", Operator: "eq", Value: []byte(`"pay"`)}}},
		{ID: "read", Effect: "allow", Conditions: []engine.Condition{{Field: "tool_name", Operator: "eq", Value: []byte(`"read"`)}}}}}}})
	if len(diags) > 0 {
		t.Fatal(diags)
	}
	d.Serve(c, "rev-1", "test", time.Now())
	return d
}

func resolve(d *Decider, tool string, o AskOptions) engine.Result {
	res, st := d.Decide(engine.Request{"tool_name": tool, "input": map[string]any{"amount": 5000.0}}, false, nil)
	out, _, _ := d.Resolve(context.Background(), engine.Request{"tool_name": tool, "input": map[string]any{"amount": 5000.0}}, res, st, o)
	return out
}

// Without a store there is nowhere to ask: an ask is denied
// APPROVAL_UNAVAILABLE, whether the caller waits or not; anything else is
// left as it is.
func TestResolveWithoutApprovalsDenies(t *testing.T) {
	d := askingDecider(t, "pay-agent")
	for _, o := range []AskOptions{{}, {Wait: time.Second}, {Approval: "pay-x"}} {
		if r := resolve(d, "pay", o); r.Decision != engine.Deny || r.Code != approval.CodeUnavailable || r.MatchedRuleID != "pay-cap" {
			t.Errorf("%+v: %+v, want deny APPROVAL_UNAVAILABLE naming the rule", o, r)
		}
	}
	if r := resolve(d, "read", AskOptions{Wait: time.Second}); r.Decision != engine.Allow {
		t.Errorf("an allow through Resolve: %+v", r)
	}
}

// A sidecar that does not know its ServiceAccount cannot say who asked,
// and an ApprovalRequest must (the agent may never approve itself): the
// ask is denied before anything is written, saying why.
func TestResolveWithoutServiceAccountDenies(t *testing.T) {
	d := askingDecider(t, "")
	d.SetApprovals(untouchable{t})
	r := resolve(d, "pay", AskOptions{Wait: time.Second})
	if r.Decision != engine.Deny || r.Code != approval.CodeUnavailable || !strings.Contains(r.Reason, "--service-account") {
		t.Fatalf("got %+v, want deny APPROVAL_UNAVAILABLE naming --service-account", r)
	}
}
