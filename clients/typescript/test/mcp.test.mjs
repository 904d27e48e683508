// @toolgate/client/mcp: a real MCP server (McpServer from the same SDK) and
// client over the SDK's InMemoryTransport; the guard in front of callTool.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Client as McpClient } from "@modelcontextprotocol/sdk/client/index.js";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { z } from "zod";
import { Client } from "../dist/index.js";
import { guardMcpClient, guardedCallTool } from "../dist/mcp.js";
import { startSidecar, samplesBundle, shortTempDir, decisionLine } from "./helpers.mjs";

let sc;
before(async () => {
  sc = await startSidecar({ bundleFile: samplesBundle(shortTempDir()) });
});
after(async () => {
  await sc?.kill();
});

/** A GitHub-like MCP server whose tools record each run, and a connected SDK client. */
async function githubServer() {
  const ran = [];
  const server = new McpServer({ name: "github", version: "1.0.0" });
  server.registerTool(
    "list_issues",
    { description: "List issues", inputSchema: { owner: z.string(), repo: z.string() } },
    async ({ owner, repo }) => {
      ran.push(["list_issues", owner, repo]);
      return { content: [{ type: "text", text: `issues of ${owner}/${repo}: #1 flaky test` }] };
    },
  );
  server.registerTool(
    "create_issue",
    { description: "Create an issue", inputSchema: { owner: z.string(), repo: z.string(), title: z.string() } },
    async ({ title }) => {
      ran.push(["create_issue", title]);
      return { content: [{ type: "text", text: `created "${title}"` }] };
    },
  );
  const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
  await server.connect(serverSide);
  const mcp = new McpClient({ name: "agent", version: "1.0.0" });
  await mcp.connect(clientSide);
  return { mcp, server, ran };
}

test("guardMcpClient: an allowed call reaches the server, a denied one never does", async () => {
  const { mcp, server, ran } = await githubServer();
  const toolgate = new Client({ url: sc.unixURL, timeoutMs: 5000 });
  const denies = [];
  try {
    const guarded = guardMcpClient(mcp, toolgate, { server: "github", agentId: "triage-bot", sessionId: "s-mcp", onDeny: (n, r) => denies.push([n, r.code]) });
    assert.equal(guarded, mcp);
    const ok = await mcp.callTool({ name: "list_issues", arguments: { owner: "acme", repo: "api" } });
    assert.equal(ok.isError, undefined);
    assert.equal(ok.content[0].text, "issues of acme/api: #1 flaky test");
    assert.deepEqual(ran, [["list_issues", "acme", "api"]]);

    const denied = await mcp.callTool({ name: "create_issue", arguments: { owner: "acme", repo: "api", title: "flaky test" } });
    assert.equal(denied.isError, true);
    assert.equal(denied.content[0].type, "text");
    assert.match(denied.content[0].text, /^toolgate denied mcp__github__create_issue: rule no-github-writes/);
    assert.equal(denied._meta["toolgate/decision"].code, "no-github-writes");
    assert.deepEqual(ran, [["list_issues", "acme", "api"]], "the denied tool must not run");
    assert.deepEqual(denies, [["mcp__github__create_issue", "no-github-writes"]]);

    // The decision log names the MCP call as the sidecar saw it.
    const line = await decisionLine(sc, (d) => d.decision_id === denied._meta["toolgate/decision"].decisionId);
    assert.equal(line.tool_name, "mcp__github__create_issue");
    assert.equal(line.framework, "mcp");
    assert.equal(line.session_id, "s-mcp");
  } finally {
    toolgate.close();
    await mcp.close();
    await server.close();
  }
});

test("guardedCallTool: fail closed when the sidecar is gone; the server is never called", async () => {
  const { mcp, server, ran } = await githubServer();
  const toolgate = new Client({ url: "unix:///nonexistent/toolgate.sock" });
  try {
    const callTool = guardedCallTool(mcp, toolgate, { server: "github", agentId: "triage-bot" });
    const r = await callTool({ name: "list_issues", arguments: { owner: "acme", repo: "api" } });
    assert.equal(r.isError, true);
    assert.match(r.content[0].text, /SIDECAR_UNAVAILABLE/);
    assert.deepEqual(ran, []);
    // The unguarded client is unchanged.
    const direct = await mcp.callTool({ name: "list_issues", arguments: { owner: "acme", repo: "api" } });
    assert.equal(direct.isError, undefined);
    assert.equal(ran.length, 1);
  } finally {
    toolgate.close();
    await mcp.close();
    await server.close();
  }
});
