package engine

import "time"

// ApprovalTimeout is how long an ask rule's calls wait for a person: its
// approval.timeout, DefaultApprovalTimeout when unset (or unreadable, in a
// rule that does not compile); 0 for a rule that does not ask. The
// compiler and the Rego export both read it here.
func ApprovalTimeout(r *Rule) time.Duration {
	if Effect(r.Effect) != EffectAsk {
		return 0
	}
	if r.Approval == nil || r.Approval.Timeout == "" {
		return DefaultApprovalTimeout
	}
	t, err := time.ParseDuration(r.Approval.Timeout)
	if err != nil || t <= 0 || t > MaxApprovalTimeout {
		return DefaultApprovalTimeout
	}
	return t
}

// approvalTimeout checks an ask rule's approval and returns its timeout:
// approval belongs to ask rules only (elsewhere it would be silently
// meaningless), and its timeout is a positive Go duration of at most
// MaxApprovalTimeout.
func approvalTimeout(d *diagnoser, ri int, r *Rule) time.Duration {
	if Effect(r.Effect) != EffectAsk {
		if r.Approval != nil {
			d.rulef(ri, r.ID, "approval", "approval is only meaningful on an ask rule (effect: ask), not %q", r.Effect)
		}
		return 0
	}
	if r.Approval != nil && r.Approval.Timeout != "" {
		t, err := time.ParseDuration(r.Approval.Timeout)
		switch {
		case err != nil:
			timeoutf(d, ri, r, "timeout %q is not a Go duration (30s, 5m, 1h)", r.Approval.Timeout)
		case t <= 0:
			timeoutf(d, ri, r, "timeout %q must be positive", r.Approval.Timeout)
		case t > MaxApprovalTimeout:
			timeoutf(d, ri, r, "timeout %q is longer than the %v maximum: a call cannot wait longer for a person", r.Approval.Timeout, MaxApprovalTimeout)
		}
	}
	return ApprovalTimeout(r)
}

func timeoutf(d *diagnoser, ri int, r *Rule, format string, args ...any) {
	d.add(ri, r.ID, -1, ruleAt(ri).Child("approval").Child("timeout"), format, args)
}
