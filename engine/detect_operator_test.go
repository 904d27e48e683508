package engine

import (
	"encoding/json"
	"slices"
	"testing"
)

// The detect operator with the built-in detectors (engine/detect): in a
// call rule (an agent writing a secret), on numbers as contains reads
// them, and in a result rule's redactions and explanation.
func TestDetectOperator(t *testing.T) {
	t.Parallel()
	req := Request(gwRequest(t, `{"tool_name":"Write","input":{"content":"key AKIAIOSFODNN7EXAMPLE mail bob@example.com","card":4111111111111111,"clean":"nothing to see"}}`))
	names := func(ns ...string) []json.RawMessage {
		out := make([]json.RawMessage, len(ns))
		for i, n := range ns {
			out[i] = raw(n)
		}
		return out
	}
	for _, tc := range []struct {
		c    Condition
		want bool
	}{
		{cond("input.content", "detect", "aws_access_key"), true},
		{Condition{Field: "input.content", Operator: "detect", Values: names("jwt", "email")}, true},
		{Condition{Field: "input.content", Operator: "detect", Values: names("jwt", "iban", "us_ssn")}, false},
		{Condition{Field: "input.clean", Operator: "detect", Values: names("aws_access_key", "email", "credit_card")}, false},
		{cond("input.card", "detect", "credit_card"), true},
		{cond("input.gone", "detect", "email"), false},
	} {
		if got := condHolds(t, tc.c, req); got != tc.want {
			t.Errorf("%s detect %s%s: held = %v, want %v", tc.c.Field, tc.c.Value, tc.c.Values, got, tc.want)
		}
	}
	// A result rule redacts each finding, and explains the first.
	c := mustCompile(t, Bundle{Policies: []Policy{ordered("p",
		resultRule("secrets", "redact", Condition{Field: "output.text", Operator: "detect", Values: names("aws_access_key", "email")}))}})
	r := evalResult(c, resultRequest(t, "key AKIAIOSFODNN7EXAMPLE mail bob@example.com"))
	want := []Redaction{{Start: 4, End: 24, PolicyID: "p", RuleID: "secrets"}, {Start: 30, End: 45, PolicyID: "p", RuleID: "secrets"}}
	if !slices.Equal(r.Redactions, want) || r.Output[OutputText] != "key [REDACTED:secrets] mail [REDACTED:secrets]" {
		t.Errorf("redactions %+v, output %q", r.Redactions, r.Output[OutputText])
	}
	if len(r.Explanations) != 1 || r.Explanations[0].Sentence != "condition 1: output.text contains an aws_access_key at byte 4 (20 bytes)" {
		t.Errorf("explanations %+v", r.Explanations)
	}
}
