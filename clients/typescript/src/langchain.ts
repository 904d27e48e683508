/**
 * Guard LangChain JS tools (@langchain/core): invoke asks toolgate after the
 * tool's schema has parsed the input and before the tool's function runs. A
 * deny does not throw: invoked with a tool call (what agents and ToolNode
 * do) the tool returns a ToolMessage with status "error" and the reason as
 * content, the shape LangChain gives a failed tool call, so the model reads
 * it; invoked with plain arguments it returns the reason as its output.
 * What the function returns is then judged by the result rules
 * (GuardOptions.judgeResult): withheld, it is replaced in the same way by
 * the reason; redacted, the redacted output is returned instead.
 *
 *   const tools = guardTools([search, pay], toolgate, {sessionId: "s-1"});
 */
import type { StructuredToolInterface } from "@langchain/core/tools";
import { ToolMessage } from "@langchain/core/messages";
import { type Client, type EvaluationResult, type GuardOptions, denialMessage, guardEvaluate, guardJudge, guardRequest, withheldMessage } from "./index.js";

export interface LangChainGuardOptions extends GuardOptions {
  onDeny?: (toolName: string, result: EvaluationResult) => void;
}

type CallFn = (arg: unknown, runManager?: unknown, config?: { toolCall?: { id?: string } }) => Promise<unknown>;

/**
 * Returns a guarded copy of tool (the original is unchanged): the same name,
 * description, schema and class, whose runs ask toolgate first. Positional
 * input (a string tool's input) is sent as args, structured input as kwargs.
 */
export function guardTool<T extends StructuredToolInterface>(tool: T, toolgate: Client, options: LangChainGuardOptions = {}): T {
  const t = tool as unknown as { _call: CallFn; name: string; responseFormat?: string };
  const run = t._call;
  if (typeof run !== "function") {
    throw new TypeError(`toolgate: guardTool: ${String(t.name)} is not a LangChain StructuredTool (no _call)`);
  }
  const guarded = Object.create(tool) as T & { _call: CallFn };
  guarded._call = async function (this: unknown, arg, runManager, config) {
    const name = t.name;
    const toolCallId = config?.toolCall?.id;
    const metadata =
      arg !== null && typeof arg === "object" && !Array.isArray(arg)
        ? { kwargs: arg as Record<string, unknown>, toolUseId: toolCallId }
        : { args: arg === undefined ? [] : [arg], toolUseId: toolCallId };
    const req = guardRequest(options, "langchain", metadata);
    const failed = (text: string): unknown => {
      const out: unknown = toolCallId
        ? new ToolMessage({ content: text, tool_call_id: toolCallId, name, status: "error" })
        : text;
      return withArtifact ? [out, undefined] : out;
    };
    const withArtifact = t.responseFormat === "content_and_artifact";
    const res = await guardEvaluate(toolgate, name, req, options);
    if (res.decision !== "allow") {
      options.onDeny?.(name, res);
      return failed(denialMessage(name, res));
    }
    const out = await run.call(this, arg, runManager, config);
    // What the model reads is the content; a redaction drops the artifact,
    // which may hold what was redacted.
    const content = withArtifact && Array.isArray(out) ? out[0] : out;
    const judged = await guardJudge(toolgate, name, req, options, content);
    if ("withheld" in judged) {
      options.onDeny?.(name, judged.withheld);
      return failed(withheldMessage(name, judged.withheld));
    }
    if (!judged.redacted) return out;
    return withArtifact ? [judged.value, undefined] : judged.value;
  };
  return guarded;
}

/** guardTool for each tool. */
export function guardTools<T extends StructuredToolInterface>(tools: readonly T[], toolgate: Client, options: LangChainGuardOptions = {}): T[] {
  return tools.map((t) => guardTool(t, toolgate, options));
}
