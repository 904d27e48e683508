/**
 * Guard an MCP TypeScript SDK client's callTool: every call asks toolgate
 * first; a denied call never reaches the server and comes back as a
 * CallToolResult with isError: true and the reason as text, which the model
 * reads like any tool error. The server's result is then judged by the
 * result rules (mcpOutput; GuardOptions.judgeResult): withheld, it comes
 * back as such an error instead; redacted, its content is the redacted
 * text (and its structuredContent is dropped).
 *
 *   const mcp = guardMcpClient(new Client({name: "agent", version: "1"}), toolgate, {server: "github"});
 */
import type { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { type Client, type EvaluationResult, type GuardOptions, type Output, denialMessage, guardEvaluate, guardJudge, guardRequest, withheldMessage } from "./index.js";

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
export function deniedResult(toolName: string, result: EvaluationResult, text = denialMessage(toolName, result)): CallToolResult {
  return {
    content: [{ type: "text", text }],
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

/**
 * The output of a CallToolResult as result rules read it, as the sidecar's
 * MCP proxy builds it: its text content joined with newlines, its
 * structuredContent, its isError, and its size (its JSON's UTF-8 bytes).
 */
export function mcpOutput(result: unknown): Output {
  const r = (result ?? {}) as { content?: unknown; structuredContent?: unknown; isError?: unknown };
  const texts = Array.isArray(r.content)
    ? (r.content as { type?: unknown; text?: unknown }[]).filter((c) => c?.type === "text" && typeof c.text === "string").map((c) => c.text as string)
    : [];
  const out: Output = { text: texts.join("\n"), isError: r.isError === true, size: Buffer.byteLength(JSON.stringify(result ?? null), "utf8") };
  if (r.structuredContent !== undefined) out.structured = r.structuredContent;
  return out;
}

/** Returns a callTool with mcp.callTool's signature that asks toolgate first. */
export function guardedCallTool(mcp: McpClient, toolgate: Client, options: McpGuardOptions = {}): CallTool {
  const original = mcp.callTool.bind(mcp) as CallTool;
  const guarded = async (...call: Parameters<CallTool>): Promise<Awaited<ReturnType<CallTool>>> => {
    const [params] = call;
    const name = options.server ? `mcp__${options.server}__${params.name}` : params.name;
    const req = guardRequest(options, "mcp", { input: params.arguments ?? {} });
    const res = await guardEvaluate(toolgate, name, req, options);
    if (res.decision !== "allow") {
      options.onDeny?.(name, res);
      return deniedResult(name, res) as Awaited<ReturnType<CallTool>>;
    }
    const result = await original(...call);
    const judged = await guardJudge(toolgate, name, req, options, result, mcpOutput(result));
    if ("withheld" in judged) {
      options.onDeny?.(name, judged.withheld);
      return deniedResult(name, judged.withheld, withheldMessage(name, judged.withheld)) as Awaited<ReturnType<CallTool>>;
    }
    if (!judged.redacted) return result;
    // The redacted text replaces the content; structuredContent, which
    // redaction does not rewrite, is dropped rather than passed on.
    const { structuredContent: _dropped, ...rest } = result as CallToolResult;
    return { ...rest, content: [{ type: "text", text: judged.value as string }] } as Awaited<ReturnType<CallTool>>;
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
