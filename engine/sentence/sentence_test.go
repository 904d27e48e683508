package sentence

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestPhrase(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("é", 40) // 80 bytes: cut at a rune boundary
	for _, tc := range []struct {
		t    Test
		want string
	}{
		{Test{Field: "output", Operator: "is_valid_json", Present: true}, "output is not valid JSON"},
		{Test{Field: "output.text", Operator: "matches", Value: json.RawMessage(`"AKIA[0-9A-Z]{16}"`), Present: true, Held: true, Match: Span{1042, 20}},
			"output.text matches pattern `AKIA[0-9A-Z]{16}` at byte 1042 (20 bytes)"},
		{Test{Field: "output.text", Operator: "detect", Value: json.RawMessage(`"credit_card"`), Present: true, Held: true, Detector: "credit_card", Match: Span{88, 19}},
			"output.text contains a credit_card at byte 88 (19 bytes)"},
		{Test{Field: "output.text", Operator: "detect", Value: json.RawMessage(`"email"`), Present: true, Held: true, Detector: "email", Match: Span{0, 5}},
			"output.text contains an email at byte 0 (5 bytes)"},
		{Test{Field: "output.text", Operator: "detect", Values: []json.RawMessage{json.RawMessage(`"jwt"`), json.RawMessage(`"iban"`)}, Present: true},
			"output.text contains no jwt, iban"},
		{Test{Field: "output.structured.rows", Operator: "gt", Value: json.RawMessage(`100`), Present: true}, "output.structured.rows is not greater than 100"},
		{Test{Field: "output.structured.rows", Operator: "gt", Value: json.RawMessage(`100`)}, "output.structured.rows is missing"},
		{Test{Field: "output.x", Operator: "exists"}, "output.x is missing"},
		{Test{Field: "output.x", Operator: "not_exists", Held: true}, "output.x is missing"},
		{Test{Field: "output.text", Operator: "contains", Value: json.RawMessage(`"` + long + `"`), Present: true},
			"output.text does not contain `" + strings.Repeat("é", 32) + "...`"},
		{Test{Field: "output.text", Operator: "eq", Value: json.RawMessage(` "x" `), Present: true}, `output.text does not equal "x"`},
		{Test{Field: "output.text", Truncated: true, Held: true}, "output.text was not read whole (the output was truncated), so the test is taken as holding"},
	} {
		if got := Phrase(tc.t); got != tc.want {
			t.Errorf("Phrase(%+v)\n got %q\nwant %q", tc.t, got, tc.want)
		}
	}
	if got := Condition(1, "x"); got != "condition 2: x" {
		t.Errorf("Condition = %q", got)
	}
	if got := Any(true, 3, 1, "p"); got != "alternative 2 of 3 holds: p" {
		t.Errorf("Any = %q", got)
	}
	if got := All(false, 2, 1, "p"); got != "test 2 of 2 fails: p" {
		t.Errorf("All = %q", got)
	}
}
