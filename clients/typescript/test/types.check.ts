// Type-checked (tsc -p tsconfig.check.json), never run: the adapters used as
// each framework's own API expects, through the package's public exports,
// against the frameworks' published types.
import { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { tool as lcTool, type StructuredToolInterface } from "@langchain/core/tools";
import { tool as aiTool, generateText, type ToolSet } from "ai";
import { query, type Options } from "@anthropic-ai/claude-agent-sdk";
import { z } from "zod";
import { type Approval, Client, type EvaluationResult, GUARD_WAIT_MS, SIDECAR_UNAVAILABLE } from "@toolgate/client";
import { guardMcpClient, guardedCallTool } from "@toolgate/client/mcp";
import { guardTool as guardLangChainTool, guardTools as guardLangChainTools } from "@toolgate/client/langchain";
import { guardTools as guardAiTools, ToolDeniedError } from "@toolgate/client/ai";
import { toolgateCanUseTool, toolgatePreToolUseHook } from "@toolgate/client/claude-agent-sdk";

const toolgate = new Client({ url: "unix:///var/run/toolgate/toolgate.sock", timeoutMs: 500, failOpen: false });

export async function core(): Promise<string> {
  const r: EvaluationResult = await toolgate.evaluate("Bash", {
    sessionId: "s-1",
    agentId: "a",
    metadata: { input: { command: "ls" }, args: [1], kwargs: { k: 1 }, toolUseId: "t" },
    framework: "custom",
    traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    extra: { roles: ["etl"] },
  });
  const n: number = toolgate.failOpenCount;
  // An ask names its ApprovalRequest; the same call sent again with it waits.
  const asked: Approval | null = r.decision === "ask" ? r.approval : null;
  if (asked) await toolgate.evaluate("Bash", { waitMs: 30_000, approval: asked.name });
  return `${r.decision} ${r.code === SIDECAR_UNAVAILABLE} ${n}`;
}

export async function mcp(): Promise<CallToolResult | unknown> {
  const client: McpClient = guardMcpClient(new McpClient({ name: "agent", version: "1" }), toolgate, { server: "github" });
  const callTool: McpClient["callTool"] = guardedCallTool(client, toolgate);
  await callTool({ name: "list_issues", arguments: { owner: "acme" } });
  return client.callTool({ name: "list_issues", arguments: { owner: "acme" } });
}

export async function langchain(): Promise<unknown> {
  const pay = lcTool(async ({ amount }: { amount: number }) => `paid ${amount}`, {
    name: "pay",
    description: "Pay",
    schema: z.object({ amount: z.number() }),
  });
  const guarded: typeof pay = guardLangChainTool(pay, toolgate, { sessionId: () => "s-1" });
  const all: StructuredToolInterface[] = guardLangChainTools([pay], toolgate);
  void all;
  return guarded.invoke({ amount: 1 });
}

export async function ai(): Promise<unknown> {
  const tools = guardAiTools(
    {
      Bash: aiTool({
        description: "shell",
        inputSchema: z.object({ command: z.string() }),
        execute: async ({ command }) => ({ ran: command }),
      }),
    },
    toolgate,
    { agentId: "a" },
  );
  const set: ToolSet = tools;
  void set;
  const out = await tools.Bash.execute!({ command: "ls" }, { toolCallId: "c", messages: [] });
  const e: Error = new ToolDeniedError("Bash", {} as EvaluationResult);
  void e;
  void generateText;
  return out;
}

export function claude(): Options {
  const options: Options = {
    canUseTool: toolgateCanUseTool(toolgate, { agentId: "a", waitMs: GUARD_WAIT_MS }),
    // The hook may wait up to waitMs for an approval: the matcher's timeout
    // (seconds) is above it, and a hook that fails blocks the call.
    hooks: { PreToolUse: [{ matcher: "*", timeout: 330, onFailure: "block", hooks: [toolgatePreToolUseHook(toolgate, { waitMs: 300_000 })] }] },
  };
  void query;
  return options;
}
