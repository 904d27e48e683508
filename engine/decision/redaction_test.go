package decision

import "testing"

func TestApplyRedactionsDistrustsSpans(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		spans []Redaction
		want  string
	}{
		{nil, "abcdef"},
		{[]Redaction{{Start: 1, End: 3, RuleID: "r"}}, "a[REDACTED:r]def"},
		{[]Redaction{{Start: 1, End: 3, RuleID: "r"}, {Start: 2, End: 4, RuleID: "s"}}, "a[REDACTED:r]def"},
		{[]Redaction{{Start: 4, End: 9, RuleID: "r"}}, "abcdef"},
		{[]Redaction{{Start: 3, End: 3, RuleID: "r"}}, "abcdef"},
		{[]Redaction{{Start: -1, End: 2, RuleID: "r"}}, "abcdef"},
		{[]Redaction{{Start: 0, End: 6, RuleID: "r"}}, "[REDACTED:r]"},
	} {
		if got := ApplyRedactions("abcdef", tc.spans); got != tc.want {
			t.Errorf("ApplyRedactions(%+v) = %q, want %q", tc.spans, got, tc.want)
		}
	}
}
