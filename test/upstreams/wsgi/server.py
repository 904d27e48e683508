"""An MCP server (Streamable HTTP, JSON answers) as a WSGI application on
the Python standard library's server, wsgiref: the MCP proxy's tests'
upstream for how WSGI reads header names.

WSGI (PEP 3333, after CGI) hands an application its request headers as
environ keys HTTP_<NAME>, the name upper-cased with '-' read as '_'; so
wsgiref (wsgiref.simple_server.WSGIRequestHandler.get_environ), like CGI
servers and any WSGI server that keeps such headers, gives a header sent
as "Mcp_Name" to the application as HTTP_MCP_NAME, the key of "Mcp-Name".
This server routes a tools/call on that header when it is present, as
SEP-2243 lets a server or gateway route on Mcp-Name without reading the
body, and on params.name otherwise.

It counts every call each tool runs; GET /stats answers
{"calls": {TOOL: N}}. It prints "listening on HOST:PORT" once it listens
on 127.0.0.1 (loopback only).
"""

import json
import threading
from socketserver import ThreadingMixIn
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

TOOLS = ["read_file", "delete_file"]
calls = {}
lock = threading.Lock()


def answer(start_response, status, doc):
    body = json.dumps(doc).encode()
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
    return [body]


def handle(msg, environ):
    method = msg.get("method")
    if method == "initialize":
        return {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                "serverInfo": {"name": "toolgate-test-wsgi", "version": "1.0.0"}}
    if method == "tools/list":
        return {"tools": [{"name": t, "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}} for t in TOOLS]}
    if method == "tools/call":
        params = msg.get("params") or {}
        name = environ.get("HTTP_MCP_NAME") or params.get("name")
        if name not in TOOLS:
            return None
        with lock:
            calls[name] = calls.get(name, 0) + 1
        path = (params.get("arguments") or {}).get("path")
        return {"content": [{"type": "text", "text": "%s ran on %s" % (name, path)}]}
    return None


def app(environ, start_response):
    if environ["PATH_INFO"] == "/stats":
        with lock:
            return answer(start_response, "200 OK", {"calls": dict(calls)})
    if environ["REQUEST_METHOD"] != "POST":
        return answer(start_response, "405 Method Not Allowed", {"error": "POST only"})
    length = int(environ.get("CONTENT_LENGTH") or 0)
    msg = json.loads(environ["wsgi.input"].read(length))
    if "id" not in msg:
        start_response("202 Accepted", [("Content-Length", "0")])
        return [b""]
    result = handle(msg, environ)
    if result is None:
        return answer(start_response, "200 OK", {"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "unknown"}})
    return answer(start_response, "200 OK", {"jsonrpc": "2.0", "id": msg["id"], "result": result})


class Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class QuietHandler(WSGIRequestHandler):
    def log_message(self, *args):
        pass


if __name__ == "__main__":
    server = make_server("127.0.0.1", 0, app, server_class=Server, handler_class=QuietHandler)
    print("listening on 127.0.0.1:%d" % server.server_port, flush=True)
    server.serve_forever()
