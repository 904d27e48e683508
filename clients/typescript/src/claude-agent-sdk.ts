/**
 * Guard the Claude Agent SDK's tool calls with toolgate: a canUseTool
 * callback and a PreToolUse hook. Either one is enough; the hook runs for
 * every tool call (permission mode or not), canUseTool only when the SDK
 * would otherwise ask.
 *
 *   query({ prompt, options: { canUseTool: toolgateCanUseTool(toolgate) } })
 *   query({ prompt, options: { hooks: { PreToolUse: [{ hooks: [toolgatePreToolUseHook(toolgate)] }] } } })
 *
 * toolgatePostToolUseHook judges what each tool returned with the result
 * rules, as `toolgate hook claude-code` does under PostToolUse:
 *
 *   hooks: { PostToolUse: [{ hooks: [toolgatePostToolUseHook(toolgate)] }] }
 */
import type { CanUseTool, HookCallback, HookJSONOutput, PermissionResult, PostToolUseHookInput, PreToolUseHookInput } from "@anthropic-ai/claude-agent-sdk";
import { type Client, type EvaluationResult, type GuardOptions, denialMessage, guardEvaluate, guardRequest, isRedacted, withheldMessage } from "./index.js";

export interface ClaudeAgentGuardOptions extends Omit<GuardOptions, "sessionId"> {
  /** The session, when the SDK does not give one (canUseTool); the hook uses the event's session_id. */
  sessionId?: string | (() => string | undefined);
  onDeny?: (toolName: string, result: EvaluationResult) => void;
}

/**
 * A canUseTool callback: allow (with the input unchanged) when toolgate
 * allows, else deny with the reason as the message the model reads; an
 * asked call waits for its approval first (GuardOptions.waitMs), and one
 * still asked is denied.
 */
export function toolgateCanUseTool(toolgate: Client, options: ClaudeAgentGuardOptions = {}): CanUseTool {
  return async (toolName, input, opts): Promise<PermissionResult> => {
    const res = await guardEvaluate(
      toolgate,
      toolName,
      guardRequest(options, "claude-agent-sdk", { input, toolUseId: opts?.toolUseID }),
      options,
    );
    if (res.decision === "allow") return { behavior: "allow", updatedInput: input };
    options.onDeny?.(toolName, res);
    return { behavior: "deny", message: denialMessage(toolName, res) };
  };
}

/**
 * A PreToolUse hook: permissionDecision allow or deny with the reason
 * (Claude shows a deny's reason to the model), or ask for a call still
 * asked (options.waitMs 0, or a sidecar that answers ask past the wait):
 * then the SDK's own permission flow (canUseTool, the user) decides, as
 * Claude Code's person at the terminal does. An asked call waits for its
 * ApprovalRequest first (GuardOptions.waitMs): give the hook's matcher a
 * timeout above it. Other events pass through with no decision.
 */
export function toolgatePreToolUseHook(toolgate: Client, options: ClaudeAgentGuardOptions = {}): HookCallback {
  return async (input, toolUseID): Promise<HookJSONOutput> => {
    if (input.hook_event_name !== "PreToolUse") return {};
    const ev = input as PreToolUseHookInput;
    const req = guardRequest(options, "claude-agent-sdk", { input: ev.tool_input, toolUseId: ev.tool_use_id ?? toolUseID }, ev.session_id);
    if (!req.agentId && ev.agent_id) req.agentId = ev.agent_id;
    const res = await guardEvaluate(toolgate, ev.tool_name, req, options);
    if (res.decision !== "allow") options.onDeny?.(ev.tool_name, res);
    return {
      hookSpecificOutput: {
        hookEventName: "PreToolUse",
        permissionDecision: res.decision,
        permissionDecisionReason: res.decision === "allow" ? allowReason(res) : denialMessage(ev.tool_name, res),
      },
    };
  };
}

function allowReason(res: EvaluationResult): string {
  if (res.matchedRuleId) return `toolgate allowed: rule ${res.matchedRuleId} (policy ${res.matchedPolicyId ?? "?"})`;
  if (res.code) return `toolgate allowed (${res.code}): ${res.reason ?? ""}`;
  return "toolgate allowed";
}

/**
 * A PostToolUse hook: judges the tool's output (tool_response, built as
 * buildOutput builds it) with the result rules. Withheld: decision block
 * with the reason, and the output replaced by the reason
 * (updatedToolOutput; updatedMCPToolOutput too for an MCP tool), so the
 * model never reads it. Redacted: the output replaced by its redacted
 * text. Allowed as it is: no decision. Fails closed: a sidecar that gives
 * no decision withholds. Other events pass through with no decision.
 */
export function toolgatePostToolUseHook(toolgate: Client, options: ClaudeAgentGuardOptions = {}): HookCallback {
  return async (input, toolUseID): Promise<HookJSONOutput> => {
    if (input.hook_event_name !== "PostToolUse") return {};
    const ev = input as PostToolUseHookInput;
    const req = guardRequest(options, "claude-agent-sdk", { input: ev.tool_input, toolUseId: ev.tool_use_id ?? toolUseID }, ev.session_id);
    if (!req.agentId && (ev as { agent_id?: string }).agent_id) req.agentId = (ev as { agent_id?: string }).agent_id;
    const mcp = ev.tool_name.startsWith("mcp__");
    const replace = (text: string, additionalContext?: string) => ({
      hookEventName: "PostToolUse" as const,
      ...(additionalContext ? { additionalContext } : {}),
      updatedToolOutput: text,
      ...(mcp ? { updatedMCPToolOutput: text } : {}),
    });
    let res: EvaluationResult;
    try {
      res = await toolgate.evaluateResult(ev.tool_name, ev.tool_response, req);
    } catch (err) {
      // An output that does not encode as JSON cannot be judged: withheld.
      const reason = `toolgate withheld the result of ${ev.tool_name}: its output cannot be judged: ${(err as Error).message}`;
      return { decision: "block", reason, hookSpecificOutput: replace(reason) };
    }
    if (res.decision === "allow" && !isRedacted(res)) return {};
    const text = res.output?.text;
    if (res.decision === "allow" && typeof text === "string") {
      return { hookSpecificOutput: replace(text, `toolgate redacted ${res.redactions.length} span(s) of the result of ${ev.tool_name}: rule ${res.matchedRuleId ?? "?"}`) };
    }
    options.onDeny?.(ev.tool_name, res);
    const reason = withheldMessage(ev.tool_name, res);
    return { decision: "block", reason, hookSpecificOutput: replace(reason) };
  };
}
