// Asked calls: waitMs and approval on the wire, an ask read as not allowed,
// the timeout covering the wait, and every guard waiting for a person. The
// real sidecar reads its bundle from a file, so it cannot ask anyone (deny
// APPROVAL_UNAVAILABLE); the answers of a sidecar with an API server are
// played by a local peer (the envtest end-to-end test asks a real one).
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import * as http from "node:http";
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { tool as aiTool } from "ai";
import { tool as lcTool } from "@langchain/core/tools";
import { z } from "zod";
import { Client, SIDECAR_UNAVAILABLE, GUARD_WAIT_MS, ToolDeniedError } from "../dist/index.js";
import { guardMcpClient } from "../dist/mcp.js";
import { guardTool as guardAiTool } from "../dist/ai.js";
import { guardTool as guardLcTool } from "../dist/langchain.js";
import { toolgateCanUseTool, toolgatePreToolUseHook } from "../dist/claude-agent-sdk.js";
import { startSidecar, shortTempDir, toolgateBin, repoRoot } from "./helpers.mjs";

const PAY = { agentId: "shop-agent", metadata: { kwargs: { amount: 5000 } } };
const ASK = JSON.stringify({
  decision: "ask", effect: "ask", matchedPolicyId: "pay-cap", matchedPolicyVersion: 1, matchedRuleId: "pay-over-cap",
  code: "APPROVAL_REQUIRED", reason: "payments over 1000 need a human approval", latencyMs: 0.01,
  approval: { name: "pay-x7k2", namespace: "agents", expiresAt: "2026-12-01T10:05:00Z" },
});
const APPROVED = JSON.stringify({
  decision: "allow", effect: "ask", matchedPolicyId: "pay-cap", matchedPolicyVersion: 1, matchedRuleId: "pay-over-cap",
  reason: "approved by alice", latencyMs: 0.01, approval: { name: "pay-x7k2", namespace: "agents", expiresAt: "2026-12-01T10:05:00Z" },
});

/**
 * A local HTTP peer that records each request body and answers the i-th
 * request with answers[i] (the last one repeats), after delayMs; with
 * forward, it forwards every request to that host:port instead (the real
 * sidecar) and records what it was sent.
 */
async function peer({ answers = [], delayMs = 0, forward } = {}) {
  const bodies = [];
  const server = http.createServer((req, res) => {
    let data = "";
    req.on("data", (c) => (data += c));
    req.on("end", () => {
      bodies.push(JSON.parse(data));
      if (forward) {
        const up = http.request({ host: forward.host, port: forward.port, path: req.url, method: "POST", headers: req.headers }, (ur) => {
          res.writeHead(ur.statusCode, ur.headers);
          ur.pipe(res);
        });
        up.end(data);
        return;
      }
      const body = answers[Math.min(bodies.length - 1, answers.length - 1)];
      setTimeout(() => {
        res.writeHead(200, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body) });
        res.end(body);
      }, delayMs);
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    bodies,
    close: () => {
      server.closeAllConnections?.();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

/** What a request carried about waiting: [wait, approval]. */
const waitOf = (b) => [b.wait, b.approval];

describe("the real sidecar, which cannot ask anyone", () => {
  let sc, fwd;
  before(async () => {
    const dir = shortTempDir();
    const bundleFile = join(dir, "ask-bundle.json");
    writeFileSync(bundleFile, execFileSync(toolgateBin(), ["bundle", "-f", join(repoRoot, "clients/testdata/pay-ask.yaml")]));
    sc = await startSidecar({ bundleFile });
    const [host, port] = sc.tcpURL.slice("http://".length).split(":");
    fwd = await peer({ forward: { host, port: Number(port) } });
  });
  after(async () => {
    await fwd?.close();
    await sc?.kill();
  });

  test("an ask rule's call is denied APPROVAL_UNAVAILABLE; waitMs and approval reach the sidecar", async () => {
    const c = new Client({ url: fwd.url, timeoutMs: 5000 });
    try {
      const cases = [
        [{}, [undefined, undefined]],
        [{ waitMs: 90_000 }, ["90000ms", undefined]],
        [{ waitMs: 1500.4 }, ["1500ms", undefined]],
        [{ waitMs: 0 }, [undefined, undefined]],
        [{ approval: "pay-x7k2" }, [undefined, "pay-x7k2"]],
      ];
      for (const [opts, sent] of cases) {
        const r = await c.evaluate("pay", { ...PAY, ...opts });
        assert.equal(r.decision, "deny", JSON.stringify(opts));
        assert.equal(r.code, "APPROVAL_UNAVAILABLE");
        assert.equal(r.matchedRuleId, "pay-over-cap");
        assert.match(r.reason, /cannot ask/);
        assert.deepEqual(waitOf(fwd.bodies.at(-1)), sent, JSON.stringify(opts));
        assert.deepEqual(fwd.bodies.at(-1).kwargs, { amount: 5000 });
      }
      const small = await c.evaluate("pay", { metadata: { kwargs: { amount: 10 } }, waitMs: 30_000 });
      assert.equal(small.decision, "allow");
      assert.equal(small.approval, null);
    } finally {
      c.close();
    }
  });

  test("a guard blocks the call with the reason, without a second request", async () => {
    const c = new Client({ url: fwd.url, timeoutMs: 5000 });
    const ran = [];
    try {
      const pay = guardAiTool("pay", aiTool({ inputSchema: z.object({ amount: z.number() }), execute: async ({ amount }) => ran.push(amount) }), c);
      const before = fwd.bodies.length;
      await assert.rejects(pay.execute({ amount: 5000 }, { toolCallId: "c1", messages: [] }), (e) => {
        assert.ok(e instanceof ToolDeniedError);
        assert.equal(e.result.code, "APPROVAL_UNAVAILABLE");
        assert.match(e.message, /^toolgate denied pay: rule pay-over-cap \(policy pay-cap\): this call needs a person's approval/);
        return true;
      });
      assert.deepEqual(ran, []);
      assert.equal(fwd.bodies.length, before + 1);
    } finally {
      c.close();
    }
  });

  test("a bad waitMs or approval rejects with TypeError before anything is sent", async () => {
    const c = new Client({ url: fwd.url, timeoutMs: 5000 });
    const before = fwd.bodies.length;
    try {
      for (const waitMs of [-1, NaN, Infinity, "30s", true]) {
        await assert.rejects(c.evaluate("pay", { ...PAY, waitMs }), (e) => e instanceof TypeError && /EvaluateOptions\.waitMs .*: want how many milliseconds/.test(e.message), String(waitMs));
        const pay = guardAiTool("pay", aiTool({ inputSchema: z.object({}), execute: async () => "ran" }), c, { waitMs });
        await assert.rejects(pay.execute({}, { toolCallId: "c", messages: [] }), (e) => e instanceof TypeError && /GuardOptions\.waitMs/.test(e.message));
      }
      for (const approval of ["", 7]) {
        await assert.rejects(c.evaluate("pay", { ...PAY, approval }), (e) => e instanceof TypeError && /approval must name an ApprovalRequest/.test(e.message));
      }
      assert.equal(fwd.bodies.length, before);
    } finally {
      c.close();
    }
  });
});

describe("answers of a sidecar that asks", () => {
  test("an ask is kept, not allowed, and names its ApprovalRequest", async () => {
    const p = await peer({ answers: [ASK] });
    const c = new Client({ url: p.url, failOpen: true, logger: { warn() {} } });
    try {
      const r = await c.evaluate("pay", PAY);
      assert.equal(r.decision, "ask");
      assert.equal(r.effect, "ask");
      assert.equal(r.code, "APPROVAL_REQUIRED");
      assert.deepEqual(r.approval, { name: "pay-x7k2", namespace: "agents", expiresAt: "2026-12-01T10:05:00Z" });
      assert.equal(c.failOpenCount, 0);
    } finally {
      c.close();
      await p.close();
    }
  });

  test("an unknown decision or a malformed approval is not a decision: denied", async () => {
    for (const body of [
      '{"decision":"escalate","effect":"escalate","latencyMs":0.01}',
      ASK.replace('"name":"pay-x7k2"', '"name":7'),
      ASK.replace('"approval":{', '"approval":"x","y":{'),
    ]) {
      const p = await peer({ answers: [body] });
      const c = new Client({ url: p.url });
      try {
        const r = await c.evaluate("pay", PAY);
        assert.equal(r.decision, "deny", body);
        assert.equal(r.code, SIDECAR_UNAVAILABLE);
        assert.match(r.reason, /not allow, deny or ask|approval is not/);
      } finally {
        c.close();
        await p.close();
      }
    }
  });

  test("the timeout covers the wait", async () => {
    // The peer holds its answer 400ms, as a sidecar holds a call until a
    // person approves: past the client's 100ms timeout, within its wait.
    const p = await peer({ answers: [APPROVED], delayMs: 400 });
    const c = new Client({ url: p.url, timeoutMs: 100 });
    try {
      const r = await c.evaluate("pay", { ...PAY, waitMs: 5000 });
      assert.equal(r.decision, "allow");
      assert.equal(r.reason, "approved by alice");
      const late = await c.evaluate("pay", PAY);
      assert.equal(late.decision, "deny");
      assert.equal(late.code, SIDECAR_UNAVAILABLE);
      assert.match(late.reason, /no answer within 100ms/);
      assert.deepEqual(p.bodies.map((b) => b.wait), ["5000ms", undefined]);
    } finally {
      c.close();
      await p.close();
    }
  });
});

/** Each guard as a function of (client, guard options) that runs pay(5000) and returns [ran, outcome]. */
const guards = {
  mcp: async (c, opts) => {
    const ran = [];
    const server = new McpServer({ name: "shop", version: "1.0.0" });
    server.registerTool("pay", { description: "Pay", inputSchema: { amount: z.number() } }, async ({ amount }) => {
      ran.push(amount);
      return { content: [{ type: "text", text: "paid" }] };
    });
    const [cs, ss] = InMemoryTransport.createLinkedPair();
    await server.connect(ss);
    const mcp = guardMcpClient(new McpClient({ name: "agent", version: "1.0.0" }), c, opts);
    await mcp.connect(cs);
    const out = await mcp.callTool({ name: "pay", arguments: { amount: 5000 } });
    await mcp.close();
    return [ran, out.isError ? out.content[0].text : "ran"];
  },
  ai: async (c, opts) => {
    const ran = [];
    const pay = guardAiTool("pay", aiTool({ inputSchema: z.object({ amount: z.number() }), execute: async ({ amount }) => (ran.push(amount), "ran") }), c, opts);
    try {
      return [ran, await pay.execute({ amount: 5000 }, { toolCallId: "c1", messages: [] })];
    } catch (e) {
      return [ran, e.message];
    }
  },
  langchain: async (c, opts) => {
    const ran = [];
    const pay = guardLcTool(lcTool(async ({ amount }) => (ran.push(amount), "ran"), { name: "pay", description: "Pay", schema: z.object({ amount: z.number() }) }), c, opts);
    return [ran, await pay.invoke({ amount: 5000 })];
  },
  "claude-agent-sdk canUseTool": async (c, opts) => {
    const r = await toolgateCanUseTool(c, opts)("pay", { amount: 5000 }, { signal: new AbortController().signal, toolUseID: "t1", requestId: "r1" });
    return [r.behavior === "allow" ? [5000] : [], r.behavior === "allow" ? "ran" : r.message];
  },
  "claude-agent-sdk PreToolUse": async (c, opts) => {
    const ev = { hook_event_name: "PreToolUse", session_id: "s", transcript_path: "/t", cwd: "/", tool_name: "pay", tool_input: { amount: 5000 }, tool_use_id: "t1" };
    const out = (await toolgatePreToolUseHook(c, opts)(ev, "t1", { signal: new AbortController().signal })).hookSpecificOutput;
    return [out.permissionDecision === "allow" ? [5000] : [], out.permissionDecision === "allow" ? "ran" : `${out.permissionDecision}: ${out.permissionDecisionReason}`];
  },
};

describe("guards wait for a person", () => {
  for (const [name, run] of Object.entries(guards)) {
    test(`${name}: an asked call is sent again with its approval and the wait, and runs once approved`, async () => {
      const p = await peer({ answers: [ASK, APPROVED] });
      const c = new Client({ url: p.url, timeoutMs: 2000 });
      try {
        // judgeResult: false: what the call sends, not its result's.
        const [ran, out] = await run(c, { agentId: "shop-agent", judgeResult: false });
        assert.deepEqual(ran, [5000], String(out));
        assert.deepEqual(p.bodies.map(waitOf), [[undefined, undefined], [`${GUARD_WAIT_MS}ms`, "pay-x7k2"]]);
        const [first, second] = p.bodies;
        delete second.wait;
        delete second.approval;
        assert.deepEqual(second, first); // the same call, so the approval is its own
      } finally {
        c.close();
        await p.close();
      }
    });

    test(`${name}: waitMs 0 blocks an ask at once, with the reason`, async () => {
      const p = await peer({ answers: [ASK, APPROVED] });
      const c = new Client({ url: p.url, timeoutMs: 2000 });
      try {
        const [ran, out] = await run(c, { waitMs: 0 });
        assert.deepEqual(ran, []);
        const text = out instanceof Object ? String(out.content ?? out) : String(out);
        assert.match(text, /toolgate asks a person about pay: rule pay-over-cap \(policy pay-cap\): payments over 1000 need a human approval \(ApprovalRequest agents\/pay-x7k2\)/);
        if (name === "claude-agent-sdk PreToolUse") assert.match(text, /^ask: /); // the SDK's own permission flow decides
        assert.equal(p.bodies.length, 1);
      } finally {
        c.close();
        await p.close();
      }
    });
  }

  test("a call still asked after the wait is not run", async () => {
    const p = await peer({ answers: [ASK] });
    const c = new Client({ url: p.url, timeoutMs: 2000 });
    try {
      const [ran, out] = await guards.ai(c, { waitMs: 2000 });
      assert.deepEqual(ran, []);
      assert.match(out, /^toolgate asks a person about pay/);
      assert.deepEqual(p.bodies.map(waitOf), [[undefined, undefined], ["2000ms", "pay-x7k2"]]);
    } finally {
      c.close();
      await p.close();
    }
  });
});
