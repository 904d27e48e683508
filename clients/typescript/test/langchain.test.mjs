// @toolgate/client/langchain: @langchain/core tools, run through tool.invoke.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { tool, DynamicTool, StructuredTool } from "@langchain/core/tools";
import { ToolMessage } from "@langchain/core/messages";
import { z } from "zod";
import { Client } from "../dist/index.js";
import { guardTool, guardTools } from "../dist/langchain.js";
import { startSidecar, samplesBundle, shortTempDir, decisionLine } from "./helpers.mjs";

let sc;
before(async () => {
  sc = await startSidecar({ bundleFile: samplesBundle(shortTempDir()) });
});
after(async () => {
  await sc?.kill();
});

function payTool(paid) {
  return tool(
    async ({ amount, currency }) => {
      paid.push(amount);
      return `paid ${amount} ${currency}`;
    },
    { name: "pay", description: "Pay an amount", schema: z.object({ amount: z.number(), currency: z.string() }) },
  );
}

test("a structured tool: allowed runs, denied returns an error ToolMessage the model reads", async () => {
  const paid = [];
  const toolgate = new Client({ url: sc.unixURL, timeoutMs: 5000 });
  try {
    const pay = payTool(paid);
    const [guarded] = guardTools([pay], toolgate, { agentId: "shop-agent", sessionId: "s-lc" });
    assert.ok(guarded instanceof StructuredTool);
    assert.equal(guarded.name, "pay");
    assert.equal(guarded.description, "Pay an amount");

    assert.equal(await guarded.invoke({ amount: 250, currency: "EUR" }), "paid 250 EUR");

    // As agents and ToolNode call tools: with a tool call.
    const ok = await guarded.invoke({ type: "tool_call", id: "call_1", name: "pay", args: { amount: 300, currency: "EUR" } });
    assert.ok(ok instanceof ToolMessage);
    assert.equal(ok.status, "success");
    assert.equal(ok.content, "paid 300 EUR");

    const denied = await guarded.invoke({ type: "tool_call", id: "call_2", name: "pay", args: { amount: 5000, currency: "EUR" } });
    assert.ok(denied instanceof ToolMessage);
    assert.equal(denied.status, "error");
    assert.equal(denied.tool_call_id, "call_2");
    assert.equal(denied.name, "pay");
    // pay-over-cap asks, and this sidecar (a bundle file) cannot ask: denied.
    assert.match(denied.content, /^toolgate denied pay: rule pay-over-cap \(policy pay-cap\): this call needs a person's approval/);

    // With plain arguments the output is the reason.
    const plain = await guarded.invoke({ amount: 9000, currency: "EUR" });
    assert.match(plain, /^toolgate denied pay: rule pay-over-cap \(policy pay-cap\): this call needs a person's approval/);
    assert.deepEqual(paid, [250, 300], "denied calls must not run");

    // The original tool is unguarded.
    assert.equal(await pay.invoke({ amount: 9000, currency: "EUR" }), "paid 9000 EUR");

    // kwargs and the tool call id reached the sidecar.
    const line = await decisionLine(sc, (d) => d.tool_name === "pay" && d.session_id === "s-lc" && d.decision === "deny");
    assert.equal(line.framework, "langchain");
  } finally {
    toolgate.close();
  }
});

test("schema validation still comes first; a string tool's input goes as args", async () => {
  const toolgate = new Client({ url: sc.tcpURL, timeoutMs: 5000 });
  const ran = [];
  try {
    const guarded = guardTool(payTool(ran), toolgate, { agentId: "shop-agent" });
    await assert.rejects(guarded.invoke({ amount: "lots" }), /did not match expected schema/);

    const shell = new DynamicTool({ name: "Bash", description: "Run a shell command", func: async (cmd) => (ran.push(cmd), `ran ${cmd}`) });
    const gshell = guardTool(shell, toolgate, { agentId: "coder-1", extra: { input: { command: "ls -la src/" } } });
    // The string reaches the sidecar as args[0]; input comes from extra here.
    assert.equal(await gshell.invoke("ls -la src/"), "ran ls -la src/");
    const denyShell = guardTool(shell, toolgate, { agentId: "coder-1", extra: { input: { command: "rm -rf /" } } });
    const msg = await denyShell.invoke({ type: "tool_call", id: "c9", name: "Bash", args: { input: "rm -rf /" } });
    assert.equal(msg.status, "error");
    assert.match(msg.content, /rule no-rm-rf/);
    assert.deepEqual(ran, ["ls -la src/"]);
  } finally {
    toolgate.close();
  }
});

test("fail closed: no sidecar, no run, an error the model reads", async () => {
  const ran = [];
  const toolgate = new Client({ url: "http://127.0.0.1:1" });
  try {
    const guarded = guardTool(payTool(ran), toolgate, { agentId: "shop-agent" });
    const m = await guarded.invoke({ type: "tool_call", id: "c1", name: "pay", args: { amount: 1, currency: "EUR" } });
    assert.equal(m.status, "error");
    assert.match(m.content, /SIDECAR_UNAVAILABLE/);
    assert.deepEqual(ran, []);
  } finally {
    toolgate.close();
  }
});
