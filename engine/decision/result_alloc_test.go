package decision

import (
	"encoding/json"
	"testing"
)

// The sidecar encodes every decision with AppendJSON into a pooled buffer;
// default deny reasons contain quotes, which once cost two allocations.
func TestAppendJSONDoesNotAllocate(t *testing.T) {
	r := Result{Decision: Deny, MatchedPolicyID: "p", MatchedPolicyVersion: 3, MatchedRuleID: "r1",
		Reason: `denied by rule "r1" of policy "p" <&> é`, LatencyMs: 0.004}
	buf := make([]byte, 0, 512)
	if n := testing.AllocsPerRun(100, func() { buf, _ = r.AppendJSON(buf[:0]) }); n != 0 {
		t.Errorf("AppendJSON allocates %v times per call", n)
	}
	var back Result
	if err := json.Unmarshal(buf, &back); err != nil || back.Reason != r.Reason {
		t.Errorf("round trip: %v, %q", err, back.Reason)
	}
}
