package engine

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// The differential of issue 28's result evaluations: the engine and the
// reference on pseudo-random bundles with result rules, judging outputs
// held whole and truncated, compared in decision, effect, deciding rule,
// redactions, the delivered output and every explanation's rule, outcome,
// score and condition. The same bundles' call evaluations are held to the
// reference too: result rules must not change them.

func generatedResultCase(data []byte) (Bundle, []map[string]any, time.Time, *refUsage) {
	g := &genSource{data: data}
	now := pickFrom(g, gwNows...)
	b := g.resultBundle(now)
	u := g.gwUsage(now)
	return b, []map[string]any{g.resultRequest(), g.resultRequest(), g.resultRequest()}, now, u
}

func resultDifferential(b Bundle, reqs []map[string]any, now time.Time, u *refUsage) string {
	c, diags := Compile(b)
	if d := validityMismatch(b, diags); d != "" {
		return d
	}
	var usage Usage
	if len(u.calls) > 0 {
		usage = u
	}
	for _, req := range reqs {
		for _, truncated := range []bool{false, true} {
			want := refGatewayPhase(b, req, now, u, true, truncated)
			judged := refJudge(b, req, now, u, want.Effect, truncated)
			if want.Decision == Deny && want.Code != "" && want.Code != CodePolicyCompileError {
				judged = refJudged{} // frozen, no policies: nothing ran
			}
			for _, explain := range []bool{false, true} {
				res := c.Evaluate(Request(req), EvalOptions{Now: fixedClock(now), Budget: time.Hour, Explain: explain, Usage: usage,
					Phase: PhaseResult, OutputTruncated: truncated})
				msg := compareGateway(res, want)
				if msg == "" {
					msg = compareJudged(res, judged, req)
				}
				if msg != "" {
					return fmt.Sprintf("result phase, truncated=%v explain=%v now=%s: %s\nbundle: %s\nrequest: %s\nusage: %s",
						truncated, explain, now.Format(time.RFC3339), msg, mustJSON(b), mustJSON(req), mustJSON(u.calls))
				}
			}
		}
	}
	return gatewayDifferential(b, reqs, now, u)
}

func compareJudged(res Result, want refJudged, req map[string]any) string {
	if len(res.Explanations) != len(want.explanations) {
		return fmt.Sprintf("explanations: engine %+v, reference %+v", res.Explanations, want.explanations)
	}
	for i, x := range res.Explanations {
		w := want.explanations[i]
		if x.PolicyID != w.PolicyID || x.RuleID != w.RuleID || x.Effect != w.Effect || x.Passed != w.Passed || x.Score != w.Score || x.Condition != w.Condition {
			return fmt.Sprintf("explanation %d: engine %+v, reference %+v", i, x, w)
		}
		if (x.Sentence == "") || (x.Condition == 0) != (x.Sentence == "the rule has no conditions: it holds whenever its filters do") {
			return fmt.Sprintf("explanation %d has sentence %q for condition %d", i, x.Sentence, x.Condition)
		}
	}
	if !slices.Equal(res.Redactions, want.redactions) {
		return fmt.Sprintf("redactions: engine %+v, reference %+v", res.Redactions, want.redactions)
	}
	if text, ok := refOutputText(req); ok && res.StatedEffect() == EffectRedact && res.Output != nil {
		if got, wantText := res.Output[OutputText], refRedact(text, want.redactions); got != wantText {
			return fmt.Sprintf("output text: engine %q, reference %q", got, wantText)
		}
	}
	return ""
}

// resultOutcome classifies a result evaluation, for the coverage check.
func resultOutcome(out refResult, judged refJudged) []string {
	keys := []string{string(out.Decision) + "/" + string(out.Effect) + "/" + string(out.Code)}
	if len(judged.redactions) > 0 {
		keys = append(keys, "redactions")
	}
	if len(judged.redactions) > 1 {
		keys = append(keys, "redactions>1")
	}
	for _, x := range judged.explanations {
		switch {
		case x.Passed:
			keys = append(keys, "passed")
		case x.Score > 0:
			keys = append(keys, "partial")
		default:
			keys = append(keys, "failed")
		}
	}
	return keys
}

func TestResultDifferential(t *testing.T) {
	t.Parallel()
	const cases = 2000
	var mismatches []string
	outcomes := map[string]int{}
	for _, data := range gatewayInputs(cases) {
		b, reqs, now, u := generatedResultCase(data)
		if msg := resultDifferential(b, reqs, now, u); msg != "" {
			mismatches = append(mismatches, msg)
		}
		for _, req := range reqs {
			want := refGatewayPhase(b, req, now, u, true, false)
			for _, k := range resultOutcome(want, refJudge(b, req, now, u, want.Effect, false)) {
				outcomes[k]++
			}
		}
	}
	for i, m := range mismatches[:min(len(mismatches), 3)] {
		t.Errorf("mismatch %d: %s", i, m)
	}
	if len(mismatches) > 0 {
		t.Errorf("%d of %d cases differ", len(mismatches), cases)
	}
	t.Logf("reference outcomes over %d result evaluations: %v", 3*cases, outcomes)
	for _, k := range []string{"allow/allow/", "allow/redact/", "allow/warn/", "allow/audit/", "deny/deny/",
		"deny/deny/POLICY_COMPILE_ERROR", "redactions", "redactions>1", "passed", "partial", "failed"} {
		if outcomes[k] < cases/200 {
			t.Errorf("outcome %s happened %d times in %d result evaluations: %v", k, outcomes[k], 3*cases, outcomes)
		}
	}
}

func FuzzResultDifferential(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("toolgate result seed: AKIA redact output.text detect"))
	for _, seed := range gatewayInputs(50) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, reqs, now, u := generatedResultCase(data)
		if msg := resultDifferential(b, reqs, now, u); msg != "" {
			t.Fatal(msg)
		}
	})
}
