package client

import (
	"reflect"
	"testing"
)

func TestRequestFields(t *testing.T) {
	r := Request{ToolName: "pay", AgentID: "a-1", Kwargs: map[string]any{"amount": 5.0},
		Extra: map[string]any{"tool_name": "other", "roles": []any{"ci"}, "environment": "prod"}}
	want := map[string]any{"tool_name": "pay", "agent_id": "a-1", "kwargs": map[string]any{"amount": 5.0},
		"roles": []any{"ci"}, "environment": "prod"}
	if got := r.fields(); !reflect.DeepEqual(got, want) {
		t.Errorf("fields() = %v, want %v (typed fields win, empty ones are left out)", got, want)
	}
	if _, ok := r.Extra["agent_id"]; ok || r.Extra["tool_name"] != "other" {
		t.Errorf("fields() changed the caller's Extra: %v", r.Extra)
	}
	if _, err := (&Request{ToolName: "x", Input: func() {}}).EngineRequest(); err == nil {
		t.Error("a function as input was accepted")
	}
}
