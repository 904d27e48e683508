package decisionlog

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/engine"
)

const secretRequest = `{"tool_name":"Bash","agent_id":"agent-1","session_id":"sess-9","tool_use_id":"tu-1",
	"input":{"command":"deploy","password":"hunter2"},"kwargs":{"token":"tok-123","amount":5}}`

func TestLogFieldsAndRedaction(t *testing.T) {
	var req engine.Request
	if err := json.Unmarshal([]byte(secretRequest), &req); err != nil {
		t.Fatal(err)
	}
	pristine, _ := json.Marshal(req)
	cases := []struct {
		fields, redact []string
		want           string
	}{
		{[]string{"input.command", "kwargs"}, []string{"kwargs.token"},
			`{"input":{"command":"deploy"},"kwargs":{"amount":5,"token":"[REDACTED]"}}`},
		{[]string{"*"}, []string{"input.*", "kwargs.token"},
			`{"agent_id":"agent-1","input":{"command":"[REDACTED]","password":"[REDACTED]"},"kwargs":{"amount":5,"token":"[REDACTED]"},"session_id":"sess-9","tool_name":"Bash","tool_use_id":"tu-1"}`},
		{[]string{"input", "input.command"}, []string{"input.password"},
			`{"input":{"command":"deploy","password":"[REDACTED]"}}`},
		{[]string{"input.missing", "tool_name.deeper"}, nil, `{}`},
		{[]string{"kwargs"}, []string{"kwargs.amount.deeper", "nothing.here"}, `{"kwargs":{"amount":5,"token":"tok-123"}}`},
	}
	for _, tc := range cases {
		got, err := json.Marshal(newFieldSelector(tc.fields, tc.redact).project(req))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("fields %v redact %v:\n got %s\nwant %s", tc.fields, tc.redact, got, tc.want)
		}
	}
	if after, _ := json.Marshal(req); string(after) != string(pristine) {
		t.Errorf("projection modified the request:\n%s\n%s", pristine, after)
	}
	arr := engine.Request{"tool_name": "x", "args": []any{"a", "secret", map[string]any{"k": "v"}}}
	got, _ := json.Marshal(newFieldSelector([]string{"args"}, []string{"args.1", "args.2.k"}).project(arr))
	if want := `{"args":["a","[REDACTED]",{"k":"[REDACTED]"}]}`; string(got) != want {
		t.Errorf("array redaction: %s, want %s", got, want)
	}
	if arr["args"].([]any)[1] != "secret" {
		t.Error("array redaction modified the request")
	}
}

// TestLogFieldsSeeWhatPoliciesSee: --log-fields and --redact parse paths
// with the engine's parser, so a path a policy sees as missing is not logged
// (args.01 is not args.1) and one it sees is.
func TestLogFieldsSeeWhatPoliciesSee(t *testing.T) {
	req := engine.Request{"tool_name": "x", "args": []any{"zero", "one"}}
	for _, path := range []string{"args.01", "args.+1", "args.1", "args.2", "args.0"} {
		c, diags := engine.Compile(engine.Bundle{Policies: []engine.Policy{{ID: "p", Rules: []engine.Rule{{ID: "r", Effect: "deny",
			Conditions: []engine.Condition{{Field: path, Operator: "exists"}}}}}}})
		if len(diags) > 0 {
			t.Fatalf("%s: %v", path, diags)
		}
		policySees := c.Evaluate(req, engine.EvalOptions{}).Decision == engine.Deny
		logged := newFieldSelector([]string{path}, nil).project(req)
		_, logSees := logged["args"]
		if policySees != logSees {
			t.Errorf("%s: a policy sees it: %v, the log shows it: %v (%v)", path, policySees, logSees, logged)
		}
		redacted, _ := json.Marshal(newFieldSelector([]string{"*"}, []string{path}).project(req))
		if redactsSomething := strings.Contains(string(redacted), Redacted); redactsSomething != policySees {
			t.Errorf("--redact %s: redacted %s, but a policy sees the field: %v", path, redacted, policySees)
		}
	}
}
