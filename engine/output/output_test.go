package output_test

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/engine/output"
)

func TestOf(t *testing.T) {
	t.Parallel()
	type point struct {
		X int `json:"x"`
	}
	for _, tc := range []struct {
		name string
		in   any
		want string // the output as JSON
	}{
		{"string", "AKIA key", `{"isError":false,"size":8,"text":"AKIA key"}`},
		{"utf-8 size in bytes", "é", `{"isError":false,"size":2,"text":"é"}`},
		{"object", map[string]any{"b": 1.0, "a": "<x>"}, `{"isError":false,"size":17,"structured":{"a":"<x>","b":1},"text":"{\"a\":\"<x>\",\"b\":1}"}`},
		{"array", []any{1.0, "two"}, `{"isError":false,"size":9,"structured":[1,"two"],"text":"[1,\"two\"]"}`},
		{"raw JSON", json.RawMessage(`{"rows": [1, 2]}`), `{"isError":false,"size":14,"structured":{"rows":[1,2]},"text":"{\"rows\":[1,2]}"}`},
		{"raw JSON string", json.RawMessage(`"hi"`), `{"isError":false,"size":2,"text":"hi"}`},
		{"number", 5000.0, `{"isError":false,"size":4,"text":"5000"}`},
		{"boolean", true, `{"isError":false,"size":4,"text":"true"}`},
		{"nil", nil, `{"isError":false,"size":0,"text":""}`},
		{"a Go struct", point{X: 3}, `{"isError":false,"size":7,"structured":{"x":3},"text":"{\"x\":3}"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := output.Of(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if err := (engine.Request{"tool_name": "t", engine.FieldOutput: got}).Validate(); err != nil {
				t.Errorf("the engine refuses what Of built: %v", err)
			}
			var b strings.Builder
			enc := json.NewEncoder(&b)
			enc.SetEscapeHTML(false)
			if err := enc.Encode(got); err != nil {
				t.Fatal(err)
			}
			if doc := strings.TrimSpace(b.String()); doc != tc.want {
				t.Errorf("Of(%#v) = %s, want %s", tc.in, doc, tc.want)
			}
		})
	}
}

func TestOfRefusesWhatIsNotJSON(t *testing.T) {
	t.Parallel()
	for _, in := range []any{json.RawMessage(`{"a":`), make(chan int), map[string]any{"f": func() {}}} {
		if _, err := output.Of(in); err == nil || !strings.Contains(err.Error(), "JSON") {
			t.Errorf("Of(%T) = %v, want an error naming JSON", in, err)
		}
	}
}

func TestOfKeepsTheValueItWasGiven(t *testing.T) {
	t.Parallel()
	in := map[string]any{"a": []any{"x"}}
	got, err := output.Of(in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got["structured"], in) {
		t.Errorf("structured = %#v, want %#v", got["structured"], in)
	}
}
