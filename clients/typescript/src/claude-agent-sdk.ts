/**
 * Guard the Claude Agent SDK's tool calls with toolgate: a canUseTool
 * callback and a PreToolUse hook. Either one is enough; the hook runs for
 * every tool call (permission mode or not), canUseTool only when the SDK
 * would otherwise ask.
 *
 *   query({ prompt, options: { canUseTool: toolgateCanUseTool(toolgate) } })
 *   query({ prompt, options: { hooks: { PreToolUse: [{ hooks: [toolgatePreToolUseHook(toolgate)] }] } } })
 */
import type { CanUseTool, HookCallback, HookJSONOutput, PermissionResult, PreToolUseHookInput } from "@anthropic-ai/claude-agent-sdk";
import { type Client, type EvaluationResult, type GuardOptions, denialMessage, guardRequest } from "./index.js";

export interface ClaudeAgentGuardOptions extends Omit<GuardOptions, "sessionId"> {
  /** The session, when the SDK does not give one (canUseTool); the hook uses the event's session_id. */
  sessionId?: string | (() => string | undefined);
  onDeny?: (toolName: string, result: EvaluationResult) => void;
}

/**
 * A canUseTool callback: allow (with the input unchanged) when toolgate
 * allows, else deny with the reason as the message the model reads.
 */
export function toolgateCanUseTool(toolgate: Client, options: ClaudeAgentGuardOptions = {}): CanUseTool {
  return async (toolName, input, opts): Promise<PermissionResult> => {
    const res = await toolgate.evaluate(
      toolName,
      guardRequest(options, "claude-agent-sdk", { input, toolUseId: opts?.toolUseID }),
    );
    if (res.decision === "allow") return { behavior: "allow", updatedInput: input };
    options.onDeny?.(toolName, res);
    return { behavior: "deny", message: denialMessage(toolName, res) };
  };
}

/**
 * A PreToolUse hook: permissionDecision allow or deny with the reason
 * (Claude shows a deny's reason to the model). Other events pass through
 * with no decision.
 */
export function toolgatePreToolUseHook(toolgate: Client, options: ClaudeAgentGuardOptions = {}): HookCallback {
  return async (input, toolUseID): Promise<HookJSONOutput> => {
    if (input.hook_event_name !== "PreToolUse") return {};
    const ev = input as PreToolUseHookInput;
    const req = guardRequest(options, "claude-agent-sdk", { input: ev.tool_input, toolUseId: ev.tool_use_id ?? toolUseID }, ev.session_id);
    if (!req.agentId && ev.agent_id) req.agentId = ev.agent_id;
    const res = await toolgate.evaluate(ev.tool_name, req);
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
