/**
 * Guard an MCP TypeScript SDK client's callTool: every call asks toolgate
 * first; a denied call never reaches the server and comes back as a
 * CallToolResult with isError: true and the reason as text, which the model
 * reads like any tool error.
 *
 *   const mcp = guardMcpClient(new Client({name: "agent", version: "1"}), toolgate, {server: "github"});
 */
import type { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { type Client, type EvaluationResult, type GuardOptions, denialMessage, guardEvaluate, guardRequest } from "./index.js";

export interface McpGuardOptions extends GuardOptions {
  /**
   * The server's name as policies know it: tools are evaluated as
   * mcp__<server>__<tool>, the name Claude Code gives MCP tools. Unset: the
   * tool's own name.
   */
  server?: string;
  /** Called with each deny (for logging); the denied result is still returned. */
  onDeny?: (toolName: string, result: EvaluationResult) => void;
}

type CallTool = McpClient["callTool"];

/** The CallToolResult a denied call returns: a tool error the model can read. */
export function deniedResult(toolName: string, result: EvaluationResult): CallToolResult {
  return {
    content: [{ type: "text", text: denialMessage(toolName, result) }],
    isError: true,
    _meta: {
      "toolgate/decision": {
        decision: result.decision,
        code: result.code,
        matchedPolicyId: result.matchedPolicyId,
        matchedRuleId: result.matchedRuleId,
        decisionId: result.decisionId,
      },
    },
  };
}

/** Returns a callTool with mcp.callTool's signature that asks toolgate first. */
export function guardedCallTool(mcp: McpClient, toolgate: Client, options: McpGuardOptions = {}): CallTool {
  const original = mcp.callTool.bind(mcp) as CallTool;
  const guarded = async (...call: Parameters<CallTool>): Promise<Awaited<ReturnType<CallTool>>> => {
    const [params] = call;
    const name = options.server ? `mcp__${options.server}__${params.name}` : params.name;
    const res = await guardEvaluate(toolgate, name, guardRequest(options, "mcp", { input: params.arguments ?? {} }), options);
    if (res.decision !== "allow") {
      options.onDeny?.(name, res);
      return deniedResult(name, res) as Awaited<ReturnType<CallTool>>;
    }
    return original(...call);
  };
  return guarded as CallTool;
}

/**
 * Guards mcp in place: its callTool asks toolgate first. Returns mcp, so
 * `const client = guardMcpClient(new Client(...), toolgate)` is one line.
 */
export function guardMcpClient<C extends McpClient>(mcp: C, toolgate: Client, options: McpGuardOptions = {}): C {
  mcp.callTool = guardedCallTool(mcp, toolgate, options);
  return mcp;
}
