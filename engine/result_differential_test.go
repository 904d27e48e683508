package engine

import (
	"fmt"
	"slices"
	"strings"
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
				shared, _ := u.sharedFor(b, req, now)
				res := c.Evaluate(Request(req), EvalOptions{Now: fixedClock(now), Budget: time.Hour, Explain: explain, Usage: usage,
					Shared: shared, Phase: PhaseResult, OutputTruncated: truncated})
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

// FuzzEvaluateResult judges arbitrary outputs with a bundle of result
// rules of every effect and operator on output.text, and holds the engine
// to the reference and to what a result decision promises: spans sorted,
// apart and inside the text, the delivered text the redacted one, and no
// sentence repeating a span's text.
func FuzzEvaluateResult(f *testing.F) {
	for _, doc := range []string{
		`{"tool_name":"read_file","output":{"text":"key AKIAZ7Q3XKDLR2M4WPNE and bob@example.com"}}`,
		`{"tool_name":"read_file","output":{"text":"ünï AKIAAKIA","isError":true,"size":12}}`,
		`{"tool_name":"query","output":{"structured":{"rows":101},"text":"{\"rows\":101}"}}`,
		`{"tool_name":"query","output":{"structured":"x"}}`,
		`{"tool_name":"query","output":{"text":""}}`,
		`{"tool_name":"query","output":"text"}`,
		`{"tool_name":"query"}`,
	} {
		f.Add([]byte(doc))
	}
	leaf := func(op string, v any) Condition { return cond("output.text", op, v) }
	b := Bundle{Policies: []Policy{
		ordered("keys",
			resultRule("aws", "redact", leaf("matches", `AKIA[0-9A-Z]{16}`)),
			resultRule("mail", "redact", Condition{Any: []Condition{leaf("contains", "@"), {All: []Condition{leaf("matches", `[a-z]+@[a-z.]+`), leaf("detect", "email")}}}}),
			resultRule("any", "redact", leaf("matches", `(?s).{3}`), cond("output.size", "gt", 100)),
			resultRule("err", "warn", cond("output.isError", "eq", true)),
		),
		{ID: "shape", Evaluation: EvaluationTiered, DefaultEffect: "deny", Rules: []Rule{
			resultRule("rows", "deny", cond("output.structured.rows", "gt", 100)),
			resultRule("json", "audit", Condition{Field: "output.text", Operator: "is_valid_json"}),
			{ID: "pii", Phase: PhaseResult, Effect: "redact", Conditions: []Condition{leaf("detect", "credit_card")}},
			allowRule("call"),
		}},
	}}
	c := mustCompile(f, b)
	f.Fuzz(func(t *testing.T, doc []byte) {
		req, err := DecodeRequest(doc)
		if err != nil {
			return
		}
		for _, truncated := range []bool{false, true} {
			want := refGatewayPhase(b, req, t0, nil, true, truncated)
			judged := refJudge(b, req, t0, nil, want.Effect, truncated)
			res := c.Evaluate(req, EvalOptions{Now: fixedClock(t0), Phase: PhaseResult, OutputTruncated: truncated, Explain: truncated})
			checkInvariants(t, res)
			if msg := compareGateway(res, want); msg != "" {
				t.Fatalf("truncated=%v: %s", truncated, msg)
			}
			if msg := compareJudged(res, judged, req); msg != "" {
				t.Fatalf("truncated=%v: %s", truncated, msg)
			}
			text, _ := refOutputText(req)
			last := 0
			for _, r := range res.Redactions {
				if r.Start < last || r.End <= r.Start || r.End > len(text) {
					t.Fatalf("redactions %+v over %d bytes", res.Redactions, len(text))
				}
				last = r.End
				for _, x := range res.Explanations {
					if r.End-r.Start >= 8 && strings.Contains(x.Sentence, text[r.Start:r.End]) {
						t.Fatalf("sentence %q repeats redacted text", x.Sentence)
					}
				}
			}
			if res.StatedEffect() == EffectRedact && !truncated && res.Output != nil && res.Output[OutputText] != nil && res.Output[OutputText] != ApplyRedactions(text, res.Redactions) {
				t.Fatalf("output %q", res.Output[OutputText])
			}
		}
	})
}
