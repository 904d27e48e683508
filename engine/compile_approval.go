package engine

import "time"

// approvalTimeout checks an ask rule's approval and returns its timeout:
// approval belongs to ask rules only (elsewhere it would be silently
// meaningless), and its timeout is a positive Go duration of at most
// MaxApprovalTimeout, DefaultApprovalTimeout when unset.
func approvalTimeout(d *diagnoser, ri int, r *Rule) time.Duration {
	if Effect(r.Effect) != EffectAsk {
		if r.Approval != nil {
			d.rulef(ri, r.ID, "approval", "approval is only meaningful on an ask rule (effect: ask), not %q", r.Effect)
		}
		return 0
	}
	if r.Approval == nil || r.Approval.Timeout == "" {
		return DefaultApprovalTimeout
	}
	t, err := time.ParseDuration(r.Approval.Timeout)
	switch {
	case err != nil:
		timeoutf(d, ri, r, "timeout %q is not a Go duration (30s, 5m, 1h)", r.Approval.Timeout)
	case t <= 0:
		timeoutf(d, ri, r, "timeout %q must be positive", r.Approval.Timeout)
	case t > MaxApprovalTimeout:
		timeoutf(d, ri, r, "timeout %q is longer than the %v maximum: a call cannot wait longer for a person", r.Approval.Timeout, MaxApprovalTimeout)
	default:
		return t
	}
	return DefaultApprovalTimeout
}

func timeoutf(d *diagnoser, ri int, r *Rule, format string, args ...any) {
	d.add(ri, r.ID, -1, ruleAt(ri).Child("approval").Child("timeout"), format, args)
}
