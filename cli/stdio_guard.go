package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/client/local"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/exitcode"
	"github.com/toolgate/toolgate/internal/tracing"
	"github.com/toolgate/toolgate/mcp"
	"github.com/toolgate/toolgate/mcp/pin"
)

// MCPStdioOptions are the flags of `toolgate mcp stdio`. Its AgentID is
// the requests' agent_id where a call's _meta names none; BundleDir is
// re-read every localReload.
type MCPStdioOptions struct {
	deciderFlags
	// Server is the requests' server field: the name policies match.
	Server string
	// MaxResultBytes is the most of a server's answer held to judge a
	// result (--max-result-bytes).
	MaxResultBytes int
	// Pins is a file of the server's pinned tool definitions (`toolgate
	// mcp pin` output, or its MCPUpstream manifest).
	Pins string
}

// localReload is how often --bundle-dir is re-read: an edit, a freeze
// added, takes effect within it.
const localReload = time.Second

// ServiceMCPStdio is the service.name of `toolgate mcp stdio`'s spans
// unless OTEL_SERVICE_NAME says otherwise.
const ServiceMCPStdio = "toolgate-mcp-stdio"

func newMCPCommand() *cobra.Command {
	return groupCommand("mcp", "Guard the MCP servers an agent starts itself, and pin their tools", "subcommand", newMCPStdioCommand(), newMCPPinCommand())
}

func newMCPStdioCommand() *cobra.Command {
	o := &MCPStdioOptions{}
	cmd := &cobra.Command{
		Use:   "stdio --server NAME [--url URL] [--pins FILE] -- COMMAND [ARG...]",
		Short: "Start an MCP server over stdio and decide every tools/call it is sent",
		Long: "stdio starts COMMAND, an MCP server speaking over stdio, and relays the agent's messages to it\n" +
			"and its messages back, unchanged, but for tools/call: each is decided first by the sidecar\n" +
			"(--url, else TOOLGATE_URL, else " + client.DefaultSocket + " if it exists, else " + client.DefaultURL + ")\n" +
			"as {tool_name, server: NAME, action: call, input: the arguments, framework: mcp}. A denied call\n" +
			"never reaches the server: the agent gets a CallToolResult with isError, the rule and reason as\n" +
			"text and the decision under _meta[\"toolgate.dev/decision\"], as from the HTTP proxy. It fails\n" +
			"closed: an unreachable, slow or failing sidecar denies. A message it cannot read unambiguously\n" +
			"is answered with a JSON-RPC error and not forwarded. Put it in front of the server's command in\n" +
			"the agent's MCP configuration; it exits with the server's status. With --bundle-dir it decides\n" +
			"locally from manifests (or a bundle document) instead, re-read every second, and says each\n" +
			"deny on stderr, since no sidecar logs it. With --pins it checks the server's tools against their\n" +
			"pinned definitions as the HTTP proxy does (docs/pinning.md). When the policies have result rules,\n" +
			"the server's tools/call results are judged before the agent reads them (deny withholds, redact\n" +
			"rewrites), each held at most --max-result-bytes.",
		Example: `  toolgate mcp stdio --server files -- npx -y @modelcontextprotocol/server-filesystem /srv
  toolgate mcp stdio --server files --bundle-dir policies/ -- npx -y @modelcontextprotocol/server-filesystem /srv
  {"mcpServers": {"files": {"command": "toolgate", "args": ["mcp", "stdio", "--server", "files", "--", "npx", "-y", "@modelcontextprotocol/server-filesystem", "/srv"]}}}`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMCPStdio(cmd, o, args, streamsOf(cmd))
		},
	}
	cmd.Flags().StringVar(&o.Server, "server", "", "the server field of the calls' requests: the name policies match (required)")
	cmd.Flags().IntVar(&o.MaxResultBytes, "max-result-bytes", mcp.DefaultMaxResultBytes, "bytes of a tools/call answer held to judge its result (from 1 KiB to 1 GiB); past it the result is judged on what was held as if every condition on its text matched, and withheld if that denies or redacts it")
	cmd.Flags().StringVar(&o.Pins, "pins", "", "the server's pinned tool definitions: the pinnedTools `toolgate mcp pin --stdio` prints, or the server's MCPUpstream manifest; a tool that drifts from them is hidden and its calls denied (pinning: warn only reports it)")
	o.register(cmd, "agent_id of the requests, where a call's _meta names none (a sidecar's binding wins)")
	return cmd
}

func runMCPStdio(cmd *cobra.Command, o *MCPStdioOptions, args []string, s streams) error {
	switch {
	case cmd.ArgsLenAtDash() != 0 || len(args) == 0:
		return exitcode.Usagef("%s: the server's command goes after --: %s --server NAME -- COMMAND [ARG...]", cmd.CommandPath(), cmd.CommandPath())
	case o.Server == "":
		return exitcode.Usagef("%s: --server NAME is required: the server field policies match", cmd.CommandPath())
	}
	if err := o.check(cmd.CommandPath()); err != nil {
		return err
	}
	if err := mcp.CheckMaxResultBytes(o.MaxResultBytes); err != nil {
		return exitcode.Usagef("%s: %v", cmd.CommandPath(), err)
	}
	pins, err := readPinsFlag(cmd.CommandPath(), o.Pins, o.Server)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	shutdown, err := tracing.Setup(ctx, ServiceMCPStdio)
	if err != nil {
		return exitcode.Usagef("%s: %v", cmd.CommandPath(), err)
	}
	defer tracing.Flush(ctx, shutdown)
	var decide mcp.Decider
	var wait mcp.Waiter // only a sidecar can hold a call for a person
	var judge mcp.ResultJudge
	var judges func() bool
	if o.BundleDir != "" {
		guard, err := local.New(local.Options{BundlePath: o.BundleDir, ServiceAccount: o.ServiceAccount})
		if err != nil {
			return exitcode.Usagef("%s: --bundle-dir %s: %v", cmd.CommandPath(), o.BundleDir, err)
		}
		go guard.Watch(ctx, localReload, func(err error) {
			fmt.Fprintf(s.err, "toolgate mcp stdio: --bundle-dir %s: %v; the last good policies keep deciding\n", o.BundleDir, err)
		})
		decide = func(_ context.Context, request []byte) (engine.Result, []byte) {
			var res client.Result
			if req, err := engine.DecodeRequest(request); err != nil {
				res.Decision, res.Effect, res.Reason = engine.Deny, engine.EffectDeny, "the call cannot be decided: "+err.Error()
			} else {
				res = guard.EvaluateRequest(req)
			}
			if res.Decision != engine.Allow {
				var call struct {
					ToolName string `json:"tool_name"`
				}
				_ = json.Unmarshal(request, &call)
				fmt.Fprintf(s.err, "toolgate mcp stdio: %s\n", explain(&res.Result, call.ToolName))
			}
			return res.Result, decisionJSON(res)
		}
		judges = guard.HasResultRules
		judge = func(_ context.Context, request []byte, truncated bool) (engine.Result, []byte) {
			var res client.Result
			if req, err := engine.DecodeRequest(request); err != nil {
				res.Decision, res.Effect, res.Reason = engine.Deny, engine.EffectDeny, "the result cannot be judged: "+err.Error()
			} else {
				res = guard.JudgeRequest(req, truncated)
			}
			if res.Decision == engine.Deny || res.Effect == engine.EffectRedact {
				var call struct {
					ToolName string `json:"tool_name"`
				}
				_ = json.Unmarshal(request, &call)
				what := explain(&res.Result, call.ToolName)
				if res.Effect == engine.EffectRedact {
					what = fmt.Sprintf("toolgate redacted %s's result: rule %s (policy %s): %s", call.ToolName, res.MatchedRuleID, res.MatchedPolicyID, res.Reason)
				}
				fmt.Fprintf(s.err, "toolgate mcp stdio: result: %s\n", what)
			}
			return res.Result, decisionJSON(res)
		}
	} else {
		c, err := client.New(client.Options{URL: o.URL, Timeout: o.Timeout})
		if err != nil {
			return exitcode.Usagef("%s: %v", cmd.CommandPath(), err)
		}
		defer c.Close()
		// The client's results are decisions, fail closed: an error (the
		// context ending) comes with a deny already.
		// Whether the sidecar's bundle has result rules, as its last
		// answer said: results go to it to be judged only then (a call
		// decided before a bundle gained them has its result pass as that
		// bundle would have let it).
		var judgesResults atomic.Bool
		judges = judgesResults.Load
		decide = func(ctx context.Context, request []byte) (engine.Result, []byte) {
			if tracing.On() {
				// The sidecar's decision span goes under the guard's call span.
				ctx = client.WithTraceparent(ctx, tracing.Traceparent(ctx))
			}
			res, err := c.EvaluateJSON(ctx, request)
			if err == nil {
				judgesResults.Store(res.JudgesResults)
			}
			return res.Result, decisionJSON(res)
		}
		// An asked call is held for a person: decided again against its
		// ApprovalRequest, the sidecar holding the answer until it is
		// decided or expires; the guard reads on meanwhile.
		wait = func(ctx context.Context, request []byte, approval string, wait time.Duration) (engine.Result, []byte) {
			if tracing.On() {
				ctx = client.WithTraceparent(ctx, tracing.Traceparent(ctx))
			}
			res, err := c.EvaluateJSONApproval(ctx, request, approval, max(wait, 0))
			if err != nil && res.Decision == "" {
				res.Decision, res.Effect, res.Reason = engine.Deny, engine.EffectDeny, err.Error()
			}
			return res.Result, decisionJSON(res)
		}
		// Results are judged by the sidecar too (a request with "output"
		// runs its result rules, or none). It judges whole outputs only, so
		// one past --max-result-bytes is withheld: the guard cannot tell it
		// the text it holds is not all.
		judge = func(ctx context.Context, request []byte, truncated bool) (engine.Result, []byte) {
			if truncated {
				res := client.Result{}
				res.Decision, res.Effect, res.Reason = engine.Deny, engine.EffectDeny,
					"the sidecar judges whole results, and this one is larger than --max-result-bytes"
				return res.Result, decisionJSON(res)
			}
			return decide(ctx, request)
		}
	}
	code, err := mcp.RunStdio(ctx, mcp.StdioOptions{Server: o.Server, AgentID: o.AgentID, Command: args, Decide: decide, Wait: wait, Pins: pins,
		Judge: judge, JudgesResults: judges, MaxResultBytes: o.MaxResultBytes},
		s.in, s.out, s.err)
	if err != nil || code != 0 {
		return &exitcode.Error{Code: code, Err: err} // the server's status, or 2 when it could not start
	}
	return nil
}

// readPinsFlag reads --pins (nil without it): a usage error says what is
// wrong with the file, or that its MCPUpstream is another server's.
func readPinsFlag(path, file, server string) (*pin.Set, error) {
	if file == "" {
		return nil, nil
	}
	doc, err := os.ReadFile(file)
	if err != nil {
		return nil, exitcode.Usagef("%s: --pins: %v", path, err)
	}
	set, named, err := pin.ParseFile(doc)
	if err != nil {
		return nil, exitcode.Usagef("%s: --pins %s: %v", path, file, err)
	}
	if named != "" && named != server {
		return nil, exitcode.Usagef("%s: --pins %s pins MCPUpstream %q, not --server %q", path, file, named, server)
	}
	return set, nil
}

// decisionJSON is the decision object the agent is shown under _meta; nil
// when it does not encode, and the guard writes the engine's fields.
func decisionJSON(res client.Result) []byte {
	b, err := res.MarshalJSON()
	if err != nil {
		return nil
	}
	return b
}
