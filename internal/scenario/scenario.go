// Package scenario is the FINDINGS reference scenario that toolgate's
// benchmarks and load generators measure: one policy whose rule i denies
// tool_i when input.command contains danger_i and kwargs.amount > i. The
// engine's own benchmarks keep their copy (they cannot import a package
// that imports the engine); everything else builds it here.
package scenario

import (
	"encoding/json"
	"fmt"

	"github.com/toolgate/toolgate/engine"
)

// Request hits rule 500 of Reference(n) for n > 500: a deny found through
// the tool index, with a substring test and a numeric comparison on the way.
const Request = `{"tool_name":"tool_500","agent_id":"agent-1","session_id":"s-1","tool_use_id":"tu-1",` +
	`"framework":"loadgen","input":{"command":"run danger_500 now"},"kwargs":{"amount":5000}}`

// Reference is the scenario with n rules, in one policy "p" whose default
// is allow.
func Reference(n int) engine.Bundle {
	rules := make([]engine.Rule, n)
	for i := range rules {
		rules[i] = engine.Rule{ID: fmt.Sprintf("r%d", i), Effect: "deny", Conditions: []engine.Condition{
			{Field: engine.FieldToolName, Operator: "eq", Value: jsonOf(fmt.Sprintf("tool_%d", i))},
			{Field: "input.command", Operator: "contains", Value: jsonOf(fmt.Sprintf("danger_%d", i))},
			{Field: "kwargs.amount", Operator: "gt", Value: jsonOf(i)},
		}}
	}
	return engine.Bundle{Policies: []engine.Policy{{ID: "p", Version: 1, DefaultEffect: "allow", Rules: rules}}}
}

func jsonOf(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // strings and ints always encode
	}
	return b
}
