// @toolgate/client/ai: Vercel AI SDK tools, through execute with the SDK's
// options shape, and through generateText with the SDK's mock model.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { tool, generateText, stepCountIs } from "ai";
import { MockLanguageModelV3 } from "ai/test";
import { z } from "zod";
import { Client, ToolDeniedError } from "../dist/index.js";
import { guardTool, guardTools } from "../dist/ai.js";
import { startSidecar, samplesBundle, shortTempDir, decisionLine } from "./helpers.mjs";

let sc;
before(async () => {
  sc = await startSidecar({ bundleFile: samplesBundle(shortTempDir()) });
});
after(async () => {
  await sc?.kill();
});

function bashTool(ran) {
  return tool({
    description: "Run a shell command",
    inputSchema: z.object({ command: z.string() }),
    execute: async ({ command }) => {
      ran.push(command);
      return { output: `ran ${command}` };
    },
  });
}

test("execute: allowed runs, denied throws ToolDeniedError and never runs", async () => {
  const ran = [];
  const toolgate = new Client({ url: sc.unixURL, timeoutMs: 5000 });
  try {
    const tools = guardTools({ Bash: bashTool(ran) }, toolgate, { agentId: "coder-1", sessionId: "s-ai" });
    assert.equal(tools.Bash.description, "Run a shell command");
    const opts = { toolCallId: "call_1", messages: [] };
    assert.deepEqual(await tools.Bash.execute({ command: "ls -la src/" }, opts), { output: "ran ls -la src/" });
    await assert.rejects(tools.Bash.execute({ command: "rm -rf /" }, { toolCallId: "call_2", messages: [] }), (e) => {
      assert.ok(e instanceof ToolDeniedError);
      assert.equal(e.result.code, "no-rm-rf");
      assert.match(e.message, /^toolgate denied Bash: rule no-rm-rf/);
      return true;
    });
    assert.deepEqual(ran, ["ls -la src/"]);
    const line = await decisionLine(sc, (d) => d.session_id === "s-ai" && d.decision === "deny");
    assert.equal(line.framework, "ai-sdk");
  } finally {
    toolgate.close();
  }
});

test("generateText: a denied call is a tool-error the model receives", async () => {
  const ran = [];
  const toolgate = new Client({ url: sc.tcpURL, timeoutMs: 5000 });
  const prompts = [];
  let call = 0;
  const model = new MockLanguageModelV3({
    doGenerate: async (options) => {
      prompts.push(options.prompt);
      call++;
      const usage = { inputTokens: { total: 1, noCache: 1 }, outputTokens: { total: 1, text: 1 } };
      if (call === 1) {
        return {
          content: [{ type: "tool-call", toolCallId: "call_rm", toolName: "Bash", input: JSON.stringify({ command: "rm -rf /" }) }],
          finishReason: { unified: "tool-calls", raw: "tool_use" },
          usage,
          warnings: [],
        };
      }
      return { content: [{ type: "text", text: "I will not delete that." }], finishReason: { unified: "stop", raw: "stop" }, usage, warnings: [] };
    },
  });
  try {
    const result = await generateText({
      model,
      prompt: "clean up",
      tools: { Bash: guardTool("Bash", bashTool(ran), toolgate, { agentId: "coder-1" }) },
      stopWhen: stepCountIs(3),
    });
    assert.deepEqual(ran, []);
    const err = result.steps[0].content.find((p) => p.type === "tool-error");
    assert.ok(err, JSON.stringify(result.steps[0].content));
    assert.ok(err.error instanceof ToolDeniedError);
    // The second model call saw the deny as the tool's result.
    assert.equal(prompts.length, 2);
    const toolMsg = prompts[1].find((m) => m.role === "tool");
    assert.match(JSON.stringify(toolMsg.content), /toolgate denied Bash: rule no-rm-rf/);
    assert.equal(result.text, "I will not delete that.");
  } finally {
    toolgate.close();
  }
});

test("a tool without execute is left alone; fail closed without a sidecar", async () => {
  const toolgate = new Client({ url: "unix:///nonexistent/toolgate.sock" });
  try {
    const noExec = tool({ description: "client-side", inputSchema: z.object({}) });
    assert.equal(guardTool("Ask", noExec, toolgate), noExec);
    const ran = [];
    const g = guardTool("Bash", bashTool(ran), toolgate, { agentId: "coder-1" });
    await assert.rejects(g.execute({ command: "ls" }, { toolCallId: "c", messages: [] }), /SIDECAR_UNAVAILABLE/);
    assert.deepEqual(ran, []);
    assert.throws(() => guardTool("", bashTool(ran), toolgate), TypeError);
  } finally {
    toolgate.close();
  }
});
