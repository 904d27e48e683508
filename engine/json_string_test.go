package engine_test

import (
	"encoding/json"
	"testing"

	"github.com/toolgate/toolgate/engine"
)

func TestAppendJSONStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `denied by rule "r1" of policy "p"`, `back\slash`, "tab\there", "nul\x00",
		"<script>&", "héllo", "bad utf8 \xff", "\u2028", `"\"`} {
		want, _ := json.Marshal(s)
		if got := engine.AppendJSONString(nil, s); string(got) != string(want) {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
		var back string
		if err := json.Unmarshal(engine.AppendJSONString(nil, s), &back); err != nil {
			t.Errorf("%q: not valid JSON: %v", s, err)
		}
	}
}
