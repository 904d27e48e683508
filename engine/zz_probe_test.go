package engine

import (
	"testing"
	"time"
)

func TestZZProbe(t *testing.T) {
	doc, _, _ := Encode(Bundle{})
	for _, tail := range []string{"}", "]", " x", "{}"} {
		_, err := Decode(append(append([]byte{}, doc...), tail...))
		t.Logf("Decode trailing %q: err=%v", tail, err)
	}
	for _, d := range []string{`{"tool_name":"x"}}`, `{"tool_name":"x"} x`, `{"tool_name":"x"}]`, `{"tool_name":"x"} {}`} {
		_, err := DecodeRequest([]byte(d))
		t.Logf("DecodeRequest %q: err=%v", d, err)
	}
	t.Logf("stringify %q", Stringify(map[string]any{"c": "a && <b>", "z": -0.0 * -1, "u": "\u2028"}))
	exp := time.Unix(100, 0)
	f1 := []FrozenAgent{{ID: "a", Reason: "one"}, {ID: "a", Reason: "two"}}
	f2 := []FrozenAgent{{ID: "a", Reason: "two"}, {ID: "a", Reason: "one"}}
	_, r1, _ := Encode(Bundle{FrozenAgents: f1})
	_, r2, _ := Encode(Bundle{FrozenAgents: f2})
	t.Logf("frozen dup order: %v", r1 == r2)
	_ = exp
}
