package cli

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/sidecar"
)

// MCPStdioOptions are the flags of `toolgate mcp stdio`.
type MCPStdioOptions struct {
	// Server is the requests' server field: the name policies match.
	Server string
	// URL is the sidecar (http://host:port, unix:///path); empty means
	// TOOLGATE_URL, then the default socket, then the default port.
	URL string
	// Timeout bounds each decision; past it the call is denied.
	Timeout time.Duration
	// AgentID is the requests' agent_id where a call's _meta names none.
	AgentID string
}

func newMCPCommand() *cobra.Command {
	return groupCommand("mcp", "Guard the MCP servers an agent starts itself", "transport", newMCPStdioCommand())
}

func newMCPStdioCommand() *cobra.Command {
	o := &MCPStdioOptions{Timeout: 2 * time.Second}
	cmd := &cobra.Command{
		Use:   "stdio --server NAME [--url URL] -- COMMAND [ARG...]",
		Short: "Start an MCP server over stdio and decide every tools/call it is sent",
		Long: "stdio starts COMMAND, an MCP server speaking over stdio, and relays the agent's messages to it\n" +
			"and its messages back, unchanged, but for tools/call: each is decided first by the sidecar\n" +
			"(--url, else TOOLGATE_URL, else " + client.DefaultSocket + " if it exists, else " + client.DefaultURL + ")\n" +
			"as {tool_name, server: NAME, action: call, input: the arguments, framework: mcp}. A denied call\n" +
			"never reaches the server: the agent gets a CallToolResult with isError, the rule and reason as\n" +
			"text and the decision under _meta[\"toolgate.dev/decision\"], as from the HTTP proxy. It fails\n" +
			"closed: an unreachable, slow or failing sidecar denies. A message it cannot read unambiguously\n" +
			"is answered with a JSON-RPC error and not forwarded. Put it in front of the server's command in\n" +
			"the agent's MCP configuration; it exits with the server's status.",
		Example: `  toolgate mcp stdio --server files -- npx -y @modelcontextprotocol/server-filesystem /srv
  {"mcpServers": {"files": {"command": "toolgate", "args": ["mcp", "stdio", "--server", "files", "--", "npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv"]}}}`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMCPStdio(cmd, o, args, streamsOf(cmd))
		},
	}
	cmd.Flags().StringVar(&o.Server, "server", "", "the server field of the calls' requests: the name policies match (required)")
	cmd.Flags().StringVar(&o.URL, "url", "", "the sidecar: http://host:port or unix:///path (default: TOOLGATE_URL, then the socket, then "+client.DefaultURL+")")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "longest to wait for a decision; past it the call is denied")
	cmd.Flags().StringVar(&o.AgentID, "agent-id", "", "agent_id of the requests, where a call's _meta names none (a sidecar's binding wins)")
	return cmd
}

func runMCPStdio(cmd *cobra.Command, o *MCPStdioOptions, args []string, s streams) error {
	switch {
	case cmd.ArgsLenAtDash() != 0 || len(args) == 0:
		return usageErrorf("%s: the server's command goes after --: %s --server NAME -- COMMAND [ARG...]", cmd.CommandPath(), cmd.CommandPath())
	case o.Server == "":
		return usageErrorf("%s: --server NAME is required: the server field policies match", cmd.CommandPath())
	case o.Timeout <= 0:
		return usageErrorf("%s: --timeout must be positive, not %v", cmd.CommandPath(), o.Timeout)
	}
	c, err := client.New(client.Options{URL: o.URL, Timeout: o.Timeout})
	if err != nil {
		return usageErrorf("%s: %v", cmd.CommandPath(), err)
	}
	defer c.Close()
	// The client's results are decisions, fail closed: an error (the
	// context ending) comes with a deny already.
	decide := func(ctx context.Context, request []byte) (engine.Result, []byte) {
		res, _ := c.EvaluateJSON(ctx, request)
		decision, err := res.MarshalJSON()
		if err != nil {
			decision = nil // the guard writes the engine's fields instead
		}
		return res.Result, decision
	}
	code, err := sidecar.RunMCPStdio(cmd.Context(), sidecar.MCPStdioOptions{Server: o.Server, AgentID: o.AgentID, Command: args, Decide: decide},
		s.in, s.out, s.err)
	if err != nil || code != 0 {
		return &ExitError{Code: code, Err: err} // the server's status, or 2 when it could not start
	}
	return nil
}
