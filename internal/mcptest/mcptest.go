// Package mcptest holds the fixtures the MCP proxy's unit tests (package
// mcp) and the sidecar's end-to-end tests of it share: the agent the
// sidecar binds and the bundle both decide with.
package mcptest

import (
	"encoding/json"
	"os"
	"sync"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/localcluster"
)

// Agent is the agent id the sidecar under test binds (--agent-id).
const Agent = "billing-bot"

// Bundle allows everything but a pay over 100 and any delete_file.
func Bundle() engine.Bundle {
	return engine.Bundle{Policies: []engine.Policy{{ID: "payments", Version: 1, DefaultEffect: "allow", Rules: []engine.Rule{
		{ID: "pay-cap", Effect: "deny", Description: "payments over 100 need a human",
			Conditions: []engine.Condition{
				{Field: "tool_name", Operator: "eq", Value: raw("pay")},
				{Field: "input.amount", Operator: "gt", Value: raw(100)},
			}},
		{ID: "no-delete", Effect: "deny", Description: "files are never deleted by agents",
			Conditions: []engine.Condition{{Field: "tool_name", Operator: "eq", Value: raw("delete_file")}}},
	}}}}
}

func raw(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// ServerBinary builds test/mcpserver (an MCP server on the official Go
// SDK, over HTTP or stdio) once per test binary and returns its path.
var ServerBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "toolgate-mcpserver")
	if err != nil {
		return "", err
	}
	return localcluster.Build(dir, "./test/mcpserver", "mcpserver")
})

// GoServerBinary builds test/mcpgoserver (an MCP server on
// mark3labs/mcp-go, whose typed handlers bind arguments with
// encoding/json) once per test binary and returns its path.
var GoServerBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "toolgate-mcpgoserver")
	if err != nil {
		return "", err
	}
	return localcluster.Build(dir, "./test/mcpgoserver", "mcpgoserver")
})
