// An MCP server on the official TypeScript SDK 1.24
// (@modelcontextprotocol/sdk, pinned in package.json), behind its own
// StreamableHTTPServerTransport, as the SDK's stateless example serves it:
// a server and a transport per request, JSON answers. Up to 1.24 that
// transport decodes a POST body with the charset its Content-Type names
// (raw-body with iconv-lite, server/streamableHttp.js handlePostRequest),
// which is what the MCP proxy's tests hold it to. It counts every call each
// tool runs; GET /stats answers {"calls": {TOOL: N}}. It prints
// "listening on HOST:PORT" once it listens on 127.0.0.1 (loopback only).
import http from "node:http";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/streamableHttp.js";
import { z } from "zod";

const calls = {};

function newServer() {
  const server = new McpServer({ name: "toolgate-test-ts-sdk-1.24", version: "1.0.0" });
  for (const name of ["read_file", "delete_file"]) {
    server.registerTool(name, { description: name, inputSchema: { path: z.string() } }, async ({ path }) => {
      calls[name] = (calls[name] ?? 0) + 1;
      return { content: [{ type: "text", text: `${name} ran on ${path}` }] };
    });
  }
  return server;
}

const httpServer = http.createServer(async (req, res) => {
  if (req.url === "/stats") {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify({ calls }));
    return;
  }
  const server = newServer();
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  res.on("close", () => {
    transport.close();
    server.close();
  });
  try {
    await server.connect(transport);
    await transport.handleRequest(req, res);
  } catch (err) {
    if (!res.headersSent) {
      res.writeHead(500).end(String(err));
    }
  }
});
httpServer.listen(0, "127.0.0.1", () => {
  console.log(`listening on 127.0.0.1:${httpServer.address().port}`);
});
