package cli

import (
	"testing"

	"github.com/toolgate/toolgate/engine"
)

// A call an ask rule held is logged with what its approval made of it
// (allow, or a deny APPROVAL_*) and names its ApprovalRequest; replay
// reads the policy's decision, ask, so that a candidate that still asks
// is no change and one that allows or denies is.
func TestReplayReadsAnAskedCallAsAsk(t *testing.T) {
	for _, tc := range []struct {
		line string
		want engine.Decision
	}{
		{`{"time":"2030-01-01T10:00:00Z","tool_name":"pay","decision":"allow","effect":"ask","matched_rule_id":"pay-cap","approval":"agents/pay-7dk2q","approval_wait_ms":5300}`, engine.Ask},
		{`{"time":"2030-01-01T10:00:00Z","tool_name":"pay","decision":"deny","effect":"deny","code":"APPROVAL_DENIED","matched_rule_id":"pay-cap","approval":"agents/pay-7dk2q"}`, engine.Ask},
		{`{"time":"2030-01-01T10:00:00Z","tool_name":"pay","decision":"deny","effect":"deny","code":"APPROVAL_UNAVAILABLE","matched_rule_id":"pay-cap"}`, engine.Ask},
		{`{"time":"2030-01-01T10:00:00Z","tool_name":"pay","decision":"ask","effect":"ask","code":"APPROVAL_REQUIRED","matched_rule_id":"pay-cap","approval":"agents/pay-7dk2q"}`, engine.Ask},
		{`{"time":"2030-01-01T10:00:00Z","tool_name":"pay","decision":"deny","effect":"deny","matched_rule_id":"no-pay"}`, engine.Deny},
	} {
		c, err := parseLoggedDecision([]byte(tc.line))
		if err != nil {
			t.Fatalf("%s: %v", tc.line, err)
		}
		if c.decision != tc.want {
			t.Errorf("%s: read as %q, want %q", tc.line, c.decision, tc.want)
		}
	}
	if _, err := parseLoggedDecision([]byte(`{"time":"2030-01-01T10:00:00Z","tool_name":"pay","decision":"allow","approval":7}`)); err == nil {
		t.Error("an approval that is not a string was read")
	}
}
