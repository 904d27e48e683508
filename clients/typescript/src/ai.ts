/**
 * Guard Vercel AI SDK tools (`tool({...})` from "ai"): execute asks toolgate
 * first. A deny throws ToolDeniedError from execute, which the SDK records
 * as a tool-error for that call and sends to the model as the tool's
 * result, so the model reads why and can change course. What execute
 * returns is judged by the result rules (GuardOptions.judgeResult): a
 * withheld result throws ResultWithheldError (a ToolDeniedError), a
 * redacted one is returned redacted. A streaming tool's final output is
 * judged; its preliminary outputs are not.
 *
 *   const tools = guardTools({ weather, pay }, toolgate, { sessionId: "s-1" });
 */
import type { Tool, ToolExecutionOptions } from "ai";
import { type Client, type EvaluateOptions, type EvaluationResult, type GuardOptions, ResultWithheldError, ToolDeniedError, guardEvaluate, guardJudge, guardRequest } from "./index.js";

export { ResultWithheldError, ToolDeniedError } from "./index.js";

export interface AiGuardOptions extends GuardOptions {
  onDeny?: (toolName: string, result: EvaluationResult) => void;
}

/** Returns a copy of t whose execute asks toolgate, as tool name, first. A tool without execute is returned as is. */
export function guardTool<T extends Tool<any, any>>(name: string, t: T, toolgate: Client, options: AiGuardOptions = {}): T {
  if (typeof name !== "string" || name === "") throw new TypeError("toolgate: guardTool(name, tool): name must be a non-empty string");
  const execute = t.execute as ((input: unknown, opts: ToolExecutionOptions) => unknown) | undefined;
  if (typeof execute !== "function") return t;
  const check = async (input: unknown, opts: ToolExecutionOptions): Promise<EvaluateOptions> => {
    const req = guardRequest(options, "ai-sdk", { input, toolUseId: opts?.toolCallId });
    const res = await guardEvaluate(toolgate, name, req, options);
    if (res.decision !== "allow") {
      options.onDeny?.(name, res);
      throw new ToolDeniedError(name, res);
    }
    return req;
  };
  // What execute returned, judged by the result rules: withheld, a
  // ResultWithheldError (a tool-error the model reads); redacted, the
  // redacted output.
  const judge = async (req: EvaluateOptions, value: unknown): Promise<unknown> => {
    const judged = await guardJudge(toolgate, name, req, options, value);
    if ("withheld" in judged) {
      options.onDeny?.(name, judged.withheld);
      throw new ResultWithheldError(name, judged.withheld);
    }
    return judged.value;
  };
  // A streaming tool (an async generator execute) stays one, so the SDK
  // still sees its preliminary outputs; its final output is judged.
  const guarded =
    execute.constructor?.name === "AsyncGeneratorFunction"
      ? async function* (input: unknown, opts: ToolExecutionOptions) {
          const req = await check(input, opts);
          return await judge(req, yield* execute.call(t, input, opts) as AsyncIterable<unknown>);
        }
      : async (input: unknown, opts: ToolExecutionOptions) => {
          const req = await check(input, opts);
          return await judge(req, await execute.call(t, input, opts));
        };
  return { ...t, execute: guarded } as T;
}

/** guardTool for every tool of a ToolSet, named by its key. */
export function guardTools<S extends Record<string, Tool<any, any>>>(tools: S, toolgate: Client, options: AiGuardOptions = {}): S {
  const out: Record<string, Tool<any, any>> = {};
  for (const [name, t] of Object.entries(tools)) out[name] = guardTool(name, t, toolgate, options);
  return out as S;
}
