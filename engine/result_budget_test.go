package engine

import (
	"testing"
	"time"
)

// TestJudgingHasTheBudget: the judging pass after the scan (explanations,
// redaction spans) is bounded by the evaluation's budget like the scan: a
// result whose judging runs past it is withheld (EVAL_TIMEOUT), never
// delivered with its redactions half collected.
func TestJudgingHasTheBudget(t *testing.T) {
	t.Parallel()
	c := mustCompile(t, Bundle{Policies: []Policy{ordered("p",
		resultRule("keys", "redact", cond("output.text", "contains", "AKIA")),
	)}})
	req := resultRequest(t, "key AKIA and AKIA again")
	if r := c.Evaluate(req, EvalOptions{Phase: PhaseResult}); r.StatedEffect() != EffectRedact || len(r.Redactions) != 2 {
		t.Fatalf("within the budget: %+v", r)
	}
	// A clock that moves an hour at every read: the scan (one rule, no
	// regex) reads it once to start, the judging pass after its rule.
	at := time.Unix(0, 0)
	slow := func() time.Time { at = at.Add(time.Hour); return at }
	r := c.Evaluate(req, EvalOptions{Phase: PhaseResult, Now: slow})
	if r.Decision != Deny || r.Code != CodeEvalTimeout || r.StatedEffect() != EffectDeny || r.Redactions != nil || r.Output != nil || r.MatchedRuleID != "" {
		t.Errorf("judging past the budget: %+v", r)
	}
}
