package request

import (
	"errors"
	"strings"
	"testing"
)

// TestDecodeRequestRefusesKnownFieldsSpelledOtherwise: agentId is not
// agent_id; a rule on agent_id (a FrozenAgent, a limit) would never see
// it, so the request is refused, naming the field and the one meant.
func TestDecodeRequestRefusesKnownFieldsSpelledOtherwise(t *testing.T) {
	for doc, want := range map[string]string{
		`{"tool_name":"Bash","agentId":"a-1"}`:                    `unknown field "agentId": did you mean "agent_id"?`,
		`{"toolName":"Bash"}`:                                     `unknown field "toolName": did you mean "tool_name"?`,
		`{"tool_name":"Bash","SessionID":"s"}`:                    `unknown field "SessionID": did you mean "session_id"?`,
		`{"tool_name":"Bash","tool-use-id":"t"}`:                  `unknown field "tool-use-id": did you mean "tool_use_id"?`,
		`{"tool_name":"Bash","Kwargs":{"amount":5000}}`:           `unknown field "Kwargs": did you mean "kwargs"?`,
		`{"tool_name":"Bash","actorConfidence":"high"}`:           `unknown field "actorConfidence": did you mean "actor_confidence"?`,
		`{"tool_name":"Bash","agent_id":"a","AGENT_ID":"frozen"}`: `unknown field "AGENT_ID": did you mean "agent_id"?`,
	} {
		for name, decode := range map[string]func([]byte) (Request, error){
			"fast": Decode,
			"std":  func(b []byte) (Request, error) { return decodeStd(b, DefaultMaxElements) },
		} {
			_, err := decode([]byte(doc))
			if err == nil || !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), want) {
				t.Errorf("%s %s: %v; want a bad request with %q", name, doc, err, want)
			}
		}
	}
	// Fields toolgate gives no meaning to are the caller's: policies may
	// read them, so they pass, however long or odd.
	for _, doc := range []string{
		`{"tool_name":"Bash","agent_id":"a","session_id":"s","input":{"agentId":"nested is the tool's own"}}`,
		`{"tool_name":"Bash","ticket":"OPS-1","agent":"x","tool":"y","customer_tier":"gold"}`,
		`{"tool_name":"Bash","` + strings.Repeat("agent_id", 10) + `":1}`,
	} {
		if _, err := Decode([]byte(doc)); err != nil {
			t.Errorf("%s: %v", doc, err)
		}
	}
}

func BenchmarkValidateRequest(b *testing.B) {
	req, err := Decode([]byte(`{"tool_name":"Bash","agent_id":"a-1","session_id":"s-1","tool_use_id":"t","framework":"claude","input":{"command":"ls"}}`))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := req.Validate(); err != nil {
			b.Fatal(err)
		}
	}
}

// isKnownField's switch names exactly knownFields: each of them, and no
// folded or other spelling.
func TestIsKnownFieldIsKnownFields(t *testing.T) {
	for _, f := range knownFields {
		if !isKnownField(f) {
			t.Errorf("isKnownField(%q) = false; it is in knownFields", f)
		}
	}
	for _, name := range []string{"", "toolName", "Tool_Name", "tool_name ", "agentid", "x", "outputs"} {
		if isKnownField(name) {
			t.Errorf("isKnownField(%q) = true; it is not in knownFields", name)
		}
	}
	if len(knownByFold) != len(knownFields) {
		t.Errorf("knownByFold holds %d names, knownFields %d", len(knownByFold), len(knownFields))
	}
}
