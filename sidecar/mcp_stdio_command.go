package sidecar

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/cli"
	"github.com/toolgate/toolgate/client"
)

// NewMCPCommand is `toolgate mcp`, which holds `stdio`: the guard for MCP
// servers an agent starts itself.
func NewMCPCommand() *cobra.Command {
	group := &cobra.Command{
		Use:   "mcp",
		Short: "Guard the MCP servers an agent starts itself",
		Args:  cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return &cli.ExitError{Code: cli.ExitUsage, Err: fmt.Errorf("%s: unknown transport %q: use %s stdio", cmd.CommandPath(), args[0], cmd.CommandPath())}
			}
			return &cli.ExitError{Code: cli.ExitUsage, Err: fmt.Errorf("%s: name a transport: %s stdio", cmd.CommandPath(), cmd.CommandPath())}
		},
	}
	group.AddCommand(newMCPStdioCommand())
	return group
}

func newMCPStdioCommand() *cobra.Command {
	o := MCPStdioOptions{Timeout: 2 * time.Second}
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
			if cmd.ArgsLenAtDash() != 0 || len(args) == 0 {
				return &cli.ExitError{Code: cli.ExitUsage, Err: fmt.Errorf("%s: the server's command goes after --: %s --server NAME -- COMMAND [ARG...]", cmd.CommandPath(), cmd.CommandPath())}
			}
			if o.Server == "" {
				return &cli.ExitError{Code: cli.ExitUsage, Err: fmt.Errorf("%s: --server NAME is required: the server field policies match", cmd.CommandPath())}
			}
			if o.Timeout <= 0 {
				return &cli.ExitError{Code: cli.ExitUsage, Err: fmt.Errorf("%s: --timeout must be positive, not %v", cmd.CommandPath(), o.Timeout)}
			}
			o.Command = args
			code, err := RunMCPStdio(cmd.Context(), o, cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr())
			if err != nil || code != 0 {
				return &cli.ExitError{Code: code, Err: err}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&o.Server, "server", "", "the server field of the calls' requests: the name policies match (required)")
	cmd.Flags().StringVar(&o.URL, "url", "", "the sidecar: http://host:port or unix:///path (default: TOOLGATE_URL, then the socket, then "+client.DefaultURL+")")
	cmd.Flags().DurationVar(&o.Timeout, "timeout", o.Timeout, "longest to wait for a decision; past it the call is denied")
	cmd.Flags().StringVar(&o.AgentID, "agent-id", "", "agent_id of the requests, where a call's _meta names none (a sidecar's binding wins)")
	return cmd
}
