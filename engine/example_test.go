package engine_test

import (
	"encoding/json"
	"fmt"

	"github.com/toolgate/toolgate/engine"
)

// Example compiles a policy that blocks `rm -rf` in the Bash tool and
// evaluates two tool calls against it.
func Example() {
	bundle := engine.Bundle{Policies: []engine.Policy{{
		ID:            "block-rm-rf",
		Version:       1,
		DefaultEffect: "allow",
		Rules: []engine.Rule{{
			ID:          "no-rm-rf",
			Description: "rm -rf is never allowed",
			Effect:      "deny",
			Conditions: []engine.Condition{
				{Field: "tool_name", Operator: "eq", Value: json.RawMessage(`"Bash"`)},
				{Field: "input.command", Operator: "matches", Value: json.RawMessage(`"\\brm\\s+-rf\\b"`)},
			},
		}},
	}}}
	compiled, diags := engine.Compile(bundle)
	if len(diags) > 0 {
		fmt.Println(diags)
		return
	}
	for _, doc := range []string{
		`{"tool_name":"Bash","agent_id":"agent-1","input":{"command":"rm -rf /tmp/build"}}`,
		`{"tool_name":"Bash","agent_id":"agent-1","input":{"command":"ls -la"}}`,
	} {
		req, err := engine.DecodeRequest([]byte(doc))
		if err != nil {
			fmt.Println(err)
			return
		}
		res := compiled.Evaluate(req, engine.EvalOptions{})
		res.LatencyMs = 0 // the one field that varies from run to run
		out, err := json.Marshal(res)
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(string(out))
	}
	// Output:
	// {"decision":"deny","effect":"deny","matchedPolicyId":"block-rm-rf","matchedPolicyVersion":1,"matchedRuleId":"no-rm-rf","code":"no-rm-rf","reason":"rm -rf is never allowed","latencyMs":0}
	// {"decision":"allow","effect":"allow","matchedPolicyId":null,"matchedPolicyVersion":null,"matchedRuleId":null,"latencyMs":0}
}
