package engine

import (
	"encoding/json"
	"time"
)

// schemaV1Bundle uses every field a bundle had before issue 9 (priorities,
// default effects, descriptions, value and values, freezes by id and by
// ServiceAccount, an expiry), and none of the new ones.
func schemaV1Bundle() Bundle {
	expires := time.Date(2026, 11, 3, 13, 0, 0, 0, time.UTC)
	return Bundle{
		Policies: []Policy{
			{ID: "guard", Version: 4, Priority: 10, DefaultEffect: "allow", Rules: []Rule{
				{ID: "no-rm", Effect: "deny", Description: "rm -rf is never allowed", Conditions: []Condition{
					{Field: "tool_name", Operator: "eq", Value: json.RawMessage(`"Bash"`)},
					{Field: "input.command", Operator: "matches", Value: json.RawMessage(`"rm\\s+-rf"`)},
				}},
				{ID: "reads", Effect: "allow", Conditions: []Condition{
					{Field: "tool_name", Operator: "in", Values: []json.RawMessage{json.RawMessage(`"Read"`), json.RawMessage(`"Grep"`)}},
				}},
			}},
			{ID: "base", Version: 1, DefaultEffect: "deny", Rules: []Rule{{ID: "all", Effect: "allow"}}},
		},
		FrozenAgents: []FrozenAgent{
			{ID: "agent-1", Reason: "incident", ExpiresAt: &expires},
			{ServiceAccount: "billing-bot"},
		},
	}
}
