package engine

import (
	"fmt"
	"time"
)

// ApprovalTimeout is how long an ask rule's calls wait for a person: its
// approval.timeout, DefaultApprovalTimeout when unset (or unreadable, in a
// rule that does not compile); 0 for a rule that does not ask. The
// compiler and the Rego export both read it here.
func ApprovalTimeout(r *Rule) time.Duration {
	t, _, _ := approvalTimeout(r)
	return t
}

// approvalTimeout is ApprovalTimeout and what is wrong with r's approval
// (at approval, or at approval.timeout): it belongs to ask rules only
// (elsewhere it would be silently meaningless), and its timeout is a
// positive Go duration of at most MaxApprovalTimeout.
func approvalTimeout(r *Rule) (time.Duration, Location, string) {
	switch {
	case Effect(r.Effect) != EffectAsk && r.Approval != nil:
		return 0, At("approval"), fmt.Sprintf("approval is only meaningful on an ask rule (effect: ask), not %q", r.Effect)
	case Effect(r.Effect) != EffectAsk:
		return 0, nil, ""
	case r.Approval == nil || r.Approval.Timeout == "":
		return DefaultApprovalTimeout, nil, ""
	}
	at, s := At("approval", "timeout"), r.Approval.Timeout
	switch t, err := time.ParseDuration(s); {
	case err != nil:
		return DefaultApprovalTimeout, at, fmt.Sprintf("timeout %q is not a Go duration (30s, 5m, 1h)", s)
	case t <= 0:
		return DefaultApprovalTimeout, at, fmt.Sprintf("timeout %q must be positive", s)
	case t > MaxApprovalTimeout:
		return DefaultApprovalTimeout, at, fmt.Sprintf("timeout %q is longer than the %v maximum: a call cannot wait longer for a person", s, MaxApprovalTimeout)
	default:
		return t, nil, ""
	}
}
