// Result rules (clients/testdata/results.yaml) in the real sidecar:
// evaluateResult, and every guard judging what its tool returned.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import { writeFileSync } from "node:fs";
import { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { tool as lcTool } from "@langchain/core/tools";
import { ToolMessage } from "@langchain/core/messages";
import { tool as aiTool } from "ai";
import { z } from "zod";
import { Client, SIDECAR_UNAVAILABLE, ResultWithheldError, ToolDeniedError, buildOutput, isRedacted } from "../dist/index.js";
import { guardMcpClient, mcpOutput } from "../dist/mcp.js";
import { guardTool as guardLangChain } from "../dist/langchain.js";
import { guardTool as guardAi } from "../dist/ai.js";
import { toolgatePostToolUseHook } from "../dist/claude-agent-sdk.js";
import { startSidecar, repoRoot, shortTempDir, toolgateBin, decisionLine } from "./helpers.mjs";

const KEY = "AKIAIOSFODNN7EXAMPLE";
const MARK = "[REDACTED:aws-key]";

let sc;
let toolgate;
before(async () => {
  const dir = shortTempDir();
  const bundle = join(dir, "results-bundle.json");
  writeFileSync(bundle, execFileSync(toolgateBin(), ["bundle", "-f", join(repoRoot, "clients/testdata/results.yaml")]));
  sc = await startSidecar({ bundleFile: bundle });
  toolgate = new Client({ url: sc.unixURL, timeoutMs: 5000 });
});
after(async () => {
  toolgate?.close();
  await sc?.kill();
});

test("buildOutput builds the output as the hook and the Go and Python clients do", () => {
  assert.deepEqual(buildOutput("é"), { isError: false, text: "é", size: 2 });
  assert.deepEqual(buildOutput({ b: 1, a: "<x>" }), { isError: false, structured: { b: 1, a: "<x>" }, text: '{"a":"<x>","b":1}', size: 17 });
  assert.deepEqual(buildOutput([1, "two"]), { isError: false, structured: [1, "two"], text: '[1,"two"]', size: 9 });
  assert.deepEqual(buildOutput(5000), { isError: false, text: "5000", size: 4 });
  assert.deepEqual(buildOutput(null), { isError: false, text: "", size: 0 });
  assert.deepEqual(buildOutput(undefined), { isError: false, text: "", size: 0 });
  assert.equal(buildOutput("boom", true).isError, true);
  assert.throws(() => buildOutput(10n), /the tool's output does not encode as JSON/);
  assert.throws(() => buildOutput(() => 1), /does not encode as JSON: a function/);
  const cycle = {};
  cycle.self = cycle;
  assert.throws(() => buildOutput(cycle), /does not encode as JSON/);
  assert.throws(() => buildOutput(NaN), /does not encode as JSON/);
  assert.throws(() => buildOutput("x", "no"), /isError must be a boolean/);
});

test("evaluateResult: redact, deny, structured, plain, over TCP and the socket", async () => {
  for (const url of [sc.unixURL, sc.tcpURL]) {
    const c = new Client({ url, timeoutMs: 5000 });
    try {
      const r = await c.evaluateResult("read_file", `aws_access_key_id = ${KEY}\n`, { metadata: { input: { path: "/creds" } }, sessionId: "s-res" });
      assert.equal(r.decision, "allow");
      assert.ok(isRedacted(r));
      assert.equal(r.effect, "redact");
      assert.equal(r.matchedRuleId, "aws-key");
      assert.equal(r.output.text, `aws_access_key_id = ${MARK}\n`);
      assert.deepEqual([r.redactions.length, r.redactions[0].start, r.redactions[0].end], [1, 20, 20 + KEY.length]);
      assert.ok(r.explanations.length > 0);

      const d = await c.evaluateResult("read_file", "CONFIDENTIAL: the merger");
      assert.deepEqual([d.decision, d.code, d.reason, d.output], ["deny", "confidential", "confidential documents stay in the company", null]);
      const rows = await c.evaluateResult("query", { count: 500, rows: [] });
      assert.deepEqual([rows.decision, rows.matchedRuleId], ["deny", "too-many-rows"]);
      const nested = await c.evaluateResult("query", { count: 1, rows: [{ key: KEY }] });
      assert.deepEqual(JSON.parse(nested.output.text), { count: 1, rows: [{ key: MARK }] });
      const plain = await c.evaluateResult("read_file", "hello");
      assert.deepEqual([plain.decision, isRedacted(plain), plain.output], ["allow", false, null]);
    } finally {
      c.close();
    }
  }
  const logged = await decisionLine(sc, (l) => l.session_id === "s-res" && l.phase === "result");
  assert.deepEqual([logged.matched_rule_id, logged.effect], ["aws-key", "redact"]);
  assert.ok(!JSON.stringify(sc.decisions).includes(KEY), "the decision log holds the redacted key");
});

test("evaluateResult refuses a caller's mistakes and fails closed", async () => {
  await assert.rejects(toolgate.evaluateResult("", "x"), /toolName must be a non-empty string/);
  await assert.rejects(toolgate.evaluateResult("read_file", "x", { waitMs: 1000 }), /waitMs and approval are for a call's approval/);
  await assert.rejects(toolgate.evaluateResult("read_file", "x", { approval: "req-1" }), /waitMs and approval/);
  await assert.rejects(toolgate.evaluateResult("read_file", 10n), TypeError);
  await assert.rejects(toolgate.evaluateOutput("read_file", "text"), /output must be an object/);
  // A malformed output reaches the sidecar's 400: a deny, never an allow.
  const bad = await toolgate.evaluateOutput("read_file", { text: 5 });
  assert.deepEqual([bad.decision, bad.code], ["deny", SIDECAR_UNAVAILABLE]);
  assert.match(bad.reason, /status 400: bad request: output.text must be a string, not a number/);
  const big = await toolgate.evaluateResult("read_file", "x".repeat(2 << 20));
  assert.deepEqual([big.decision, big.code], ["deny", SIDECAR_UNAVAILABLE]);
  const gone = new Client({ url: "unix:///nonexistent/toolgate.sock", timeoutMs: 500 });
  const r = await gone.evaluateResult("read_file", "hello");
  assert.deepEqual([r.decision, r.code], ["deny", SIDECAR_UNAVAILABLE]);
});

async function filesServer() {
  const server = new McpServer({ name: "files", version: "1.0.0" });
  server.registerTool("read_file", { description: "Read a file", inputSchema: { path: z.string() } }, async ({ path }) => ({
    content: [{ type: "text", text: { "/creds": `key=${KEY}`, "/plan": "CONFIDENTIAL plan", "/readme": "hello" }[path] }],
  }));
  server.registerTool("query", { description: "Query", inputSchema: { sql: z.string() } }, async () => ({
    content: [{ type: "text", text: "500 rows" }],
    structuredContent: { count: 500 },
  }));
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const mcp = new McpClient({ name: "agent", version: "1.0.0" });
  await mcp.connect(clientSide);
  return mcp;
}

test("MCP guard: a redacted result's content is redacted, a withheld one is a tool error", async () => {
  const mcp = guardMcpClient(await filesServer(), toolgate, { sessionId: "s-mcp-res" });
  assert.deepEqual(mcpOutput({ content: [{ type: "text", text: "a" }, { type: "image", data: "" }, { type: "text", text: "b" }], structuredContent: { n: 1 } }).text, "a\nb");
  const redacted = await mcp.callTool({ name: "read_file", arguments: { path: "/creds" } });
  assert.deepEqual(redacted.content, [{ type: "text", text: `key=${MARK}` }]);
  const withheld = await mcp.callTool({ name: "read_file", arguments: { path: "/plan" } });
  assert.equal(withheld.isError, true);
  assert.equal(withheld.content[0].text, "toolgate withheld the result of read_file: rule confidential (policy results): confidential documents stay in the company");
  assert.ok(!JSON.stringify(withheld).includes("CONFIDENTIAL plan"));
  const rows = await mcp.callTool({ name: "query", arguments: { sql: "select *" } });
  assert.equal(rows.isError, true);
  assert.match(rows.content[0].text, /rule too-many-rows/);
  assert.equal(rows.structuredContent, undefined);
  const plain = await mcp.callTool({ name: "read_file", arguments: { path: "/readme" } });
  assert.deepEqual(plain.content, [{ type: "text", text: "hello" }]);
});

test("LangChain guard: redacted output, a withheld result as an error ToolMessage", async () => {
  const read = lcTool(async ({ path }) => (path === "/creds" ? `key=${KEY}` : "CONFIDENTIAL plan"), {
    name: "read_file", description: "Read a file", schema: z.object({ path: z.string() }),
  });
  const guarded = guardLangChain(read, toolgate);
  assert.equal(await guarded.invoke({ path: "/creds" }), `key=${MARK}`);
  assert.equal(await guarded.invoke({ path: "/plan" }), "toolgate withheld the result of read_file: rule confidential (policy results): confidential documents stay in the company");
  const msg = await guarded.invoke({ type: "tool_call", id: "call_9", name: "read_file", args: { path: "/plan" } });
  assert.ok(msg instanceof ToolMessage);
  assert.equal(msg.status, "error");
  assert.match(String(msg.content), /toolgate withheld the result of read_file/);
  const raw = guardLangChain(read, toolgate, { judgeResult: false });
  assert.equal(await raw.invoke({ path: "/creds" }), `key=${KEY}`);
});

test("AI SDK guard: redacted output, a withheld result throws ResultWithheldError", async () => {
  const t = aiTool({
    description: "Query",
    inputSchema: z.object({ sql: z.string() }),
    execute: async ({ sql }) => (sql === "one" ? { count: 1, rows: [{ key: KEY }] } : { count: 500, rows: [] }),
  });
  const guarded = guardAi("query", t, toolgate);
  const opts = { toolCallId: "call_1", messages: [] };
  assert.deepEqual(await guarded.execute({ sql: "one" }, opts), { count: 1, rows: [{ key: MARK }] });
  await assert.rejects(guarded.execute({ sql: "all" }, opts), (e) => {
    assert.ok(e instanceof ResultWithheldError);
    assert.ok(e instanceof ToolDeniedError);
    assert.equal(e.ofResult, true);
    assert.match(e.message, /^toolgate withheld the result of query: rule too-many-rows/);
    return true;
  });
  const streaming = aiTool({
    description: "Read",
    inputSchema: z.object({}),
    async *execute() {
      yield "reading";
      return `key=${KEY}`;
    },
  });
  const gen = guardAi("read_file", streaming, toolgate).execute({}, opts);
  assert.deepEqual(await gen.next(), { value: "reading", done: false });
  assert.deepEqual(await gen.next(), { value: `key=${MARK}`, done: true });
});

test("Claude Agent SDK PostToolUse hook: replace redacted, block withheld", async () => {
  const hook = toolgatePostToolUseHook(toolgate);
  const post = (tool_name, tool_response) => hook({
    hook_event_name: "PostToolUse", session_id: "sess", transcript_path: "/tmp/t.jsonl", cwd: "/w",
    tool_name, tool_input: { path: "/creds" }, tool_response, tool_use_id: "toolu_1",
  }, "toolu_1", { signal: new AbortController().signal });
  const mcp = await post("mcp__files__read_file", `key=${KEY}`);
  assert.equal(mcp.decision, undefined);
  assert.equal(mcp.hookSpecificOutput.updatedMCPToolOutput, `key=${MARK}`);
  assert.equal(mcp.hookSpecificOutput.updatedToolOutput, `key=${MARK}`);
  const read = await post("Read", { file: { content: `key=${KEY}` } });
  assert.equal(read.hookSpecificOutput.updatedMCPToolOutput, undefined);
  assert.deepEqual(JSON.parse(read.hookSpecificOutput.updatedToolOutput), { file: { content: `key=${MARK}` } });
  const blocked = await post("Bash", { stdout: "CONFIDENTIAL plan" });
  assert.equal(blocked.decision, "block");
  assert.match(blocked.reason, /^toolgate withheld the result of Bash: rule confidential/);
  assert.equal(blocked.hookSpecificOutput.updatedToolOutput, blocked.reason);
  assert.deepEqual(await post("Read", "hello"), {});
  assert.deepEqual(await hook({ hook_event_name: "PreToolUse", tool_name: "Read" }, "t", { signal: new AbortController().signal }), {});
});
