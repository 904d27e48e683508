package decisionlog

import (
	"strings"
	"testing"
)

func TestParseTraceparent(t *testing.T) {
	t.Parallel()
	const trace, span = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, tc := range []struct {
		header string
		ok     bool
	}{
		{"00-" + trace + "-" + span + "-01", true},
		{"00-" + trace + "-" + span + "-00", true},
		{"01-" + trace + "-" + span + "-01-future-fields", true}, // a later version may append fields
		{"00-" + trace + "-" + span + "-01-extra", false},        // version 00 is exactly 55 characters
		{"ff-" + trace + "-" + span + "-01", false},              // version ff is invalid
		{"00-" + strings.ToUpper(trace) + "-" + span + "-01", false},
		{"00-00000000000000000000000000000000-" + span + "-01", false},
		{"00-" + trace + "-0000000000000000-01", false},
		{"00-" + trace + "-" + span + "-0", false},
		{"00_" + trace + "-" + span + "-01", false},
		{"00-" + trace + "-" + span + "-zz", false},
		{"", false},
		{"garbage", false},
	} {
		gotTrace, gotSpan, _ := ParseTraceparent(tc.header)
		if ok := gotTrace != ""; ok != tc.ok || (ok && (gotTrace != trace || gotSpan != span)) {
			t.Errorf("%q: trace %q span %q, want ok=%v", tc.header, gotTrace, gotSpan, tc.ok)
		}
	}
}
