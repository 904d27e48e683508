"""An MCP server over stdio that reads its input as the official Python SDK
does, for toolgate's stdio guard tests (no PyPI here, so not the SDK itself).

The SDK's stdio_server (mcp/server/stdio.py) wraps stdin as
anyio.wrap_file(TextIOWrapper(sys.stdin.buffer, encoding="utf-8")) and
iterates it by line, validating each line as one JSON-RPC message and
going on to the next line when one does not validate. TextIOWrapper is in
universal-newlines mode there (newline=None): "\n", "\r" and "\r\n" each end
a line. anyio.wrap_file only runs the same iteration in a worker thread, so
this server iterates the same TextIOWrapper directly, stdlib only.

Every request and notification it runs is appended to the ledger file
named by argv[1], one JSON line {"method", "params"} each, so a test can
tell what reached it.
"""

import io
import json
import sys

TOOLS = [
    {"name": "read_file", "description": "read a file",
     "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
    {"name": "delete_file", "description": "delete a file",
     "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
]


def main():
    ledger = open(sys.argv[1], "a", encoding="utf-8")
    stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8")
    stdout = io.TextIOWrapper(sys.stdout.buffer, encoding="utf-8")

    def send(msg):
        stdout.write(json.dumps(msg) + "\n")
        stdout.flush()

    for line in stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue  # as the SDK: the error goes to the session, the next line is read
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0" or "method" not in msg:
            continue
        method, params, mid = msg["method"], msg.get("params") or {}, msg.get("id")
        ledger.write(json.dumps({"method": method, "params": params}) + "\n")
        ledger.flush()
        if mid is None:
            continue
        if method == "initialize":
            result = {"protocolVersion": params.get("protocolVersion", "2025-11-25"),
                      "capabilities": {"tools": {}},
                      "serverInfo": {"name": "python-stdio-like-the-sdk", "version": "1.0.0"}}
        elif method == "tools/list":
            result = {"tools": TOOLS}
        elif method == "tools/call":
            args = params.get("arguments") or {}
            result = {"content": [{"type": "text", "text": "%s %s" % (params.get("name"), args.get("path"))}]}
        else:
            result = {}
        send({"jsonrpc": "2.0", "id": mid, "result": result})


if __name__ == "__main__":
    main()
