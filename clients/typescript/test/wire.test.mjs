// The client's HTTP/1.1 reading against raw peers that answer the way a
// proxy or another server might: chunked, HTTP/1.0 until close, 100
// Continue, Connection: close, garbage, and connections dropped on reuse.
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import * as net from "node:net";
import * as http from "node:http";
import { Client, SIDECAR_UNAVAILABLE } from "../dist/index.js";

const DECISION = '{"decision":"allow","effect":"allow","matchedPolicyId":null,"matchedPolicyVersion":null,"matchedRuleId":null,"latencyMs":0.01,"decisionId":"d-1"}';

/**
 * A raw TCP peer: answer(request number on this connection, socket) writes
 * what it likes once a request's body is in. Counts connections.
 */
async function rawPeer(answer) {
  const sockets = new Set();
  const peer = { connections: 0, requests: 0 };
  const server = net.createServer((s) => {
    peer.connections++;
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
    s.on("error", () => {});
    let buf = "";
    let onThisConn = 0;
    s.on("data", (d) => {
      buf += d.toString("latin1");
      for (;;) {
        const end = buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        const len = Number(/content-length: (\d+)/i.exec(buf.slice(0, end))?.[1] ?? 0);
        if (buf.length < end + 4 + len) return;
        buf = buf.slice(end + 4 + len);
        peer.requests++;
        answer(++onThisConn, s);
      }
    });
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  peer.url = `http://127.0.0.1:${server.address().port}`;
  peer.close = () => {
    for (const s of sockets) s.destroy();
    return new Promise((r) => server.close(() => r()));
  };
  return peer;
}

const withLength = (body, extra = "") => `HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n${extra}Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

describe("reading answers", () => {
  test("chunked, split across writes", async () => {
    const peer = await rawPeer((_, s) => {
      const half = DECISION.length >> 1;
      s.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
      s.write(`${half.toString(16)}\r\n${DECISION.slice(0, half)}\r\n`);
      setTimeout(() => s.write(`${(DECISION.length - half).toString(16)};ext=1\r\n${DECISION.slice(half)}\r\n0\r\n\r\n`), 5);
    });
    const c = new Client({ url: peer.url, timeoutMs: 5000 });
    try {
      for (let i = 0; i < 3; i++) {
        const r = await c.evaluate("Read");
        assert.equal(r.decision, "allow", r.reason);
        assert.equal(r.decisionId, "d-1");
      }
      assert.equal(peer.connections, 1);
    } finally {
      c.close();
      await peer.close();
    }
  });

  test("HTTP/1.0 read until close, 100 Continue, Connection: close", async () => {
    const peer = await rawPeer((n, s) => {
      const kind = peer.requests % 3;
      if (kind === 1) {
        s.end(`HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n${DECISION}`);
      } else if (kind === 2) {
        s.write("HTTP/1.1 100 Continue\r\n\r\n" + withLength(DECISION));
      } else {
        s.end(withLength(DECISION, "Connection: close\r\n"));
      }
    });
    const c = new Client({ url: peer.url, timeoutMs: 5000 });
    try {
      for (let i = 0; i < 6; i++) {
        const r = await c.evaluate("Read");
        assert.equal(r.decision, "allow", `call ${i}: ${r.reason}`);
      }
      // Each 1.0 and Connection: close answer ended its connection:
      // 1.0 | continue, close | 1.0 | continue, close.
      assert.equal(peer.connections, 4);
    } finally {
      c.close();
      await peer.close();
    }
  });

  test("garbage, truncated and dropped answers are no decision", async () => {
    const answers = [
      (s) => s.end("hello\r\n\r\n"),
      (s) => s.end("HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{\"decision\":\"allow\"}"),
      (s) => s.end("HTTP/1.1 200 OK\r\nContent-Le"),
      (s) => s.destroy(),
      (s) => s.end("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n{}"),
      (s) => s.end("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"),
    ];
    const peer = await rawPeer((_, s) => answers[(peer.requests - 1) % answers.length](s));
    const c = new Client({ url: peer.url, timeoutMs: 2000 });
    try {
      for (let i = 0; i < answers.length; i++) {
        const r = await c.evaluate("Read");
        assert.equal(r.decision, "deny", `answer ${i}`);
        assert.equal(r.code, SIDECAR_UNAVAILABLE, `answer ${i}`);
      }
    } finally {
      c.close();
      await peer.close();
    }
  });

  test("a kept-alive connection dropped on reuse is retried once on a new one", async () => {
    // Each connection answers its first request and drops on its second.
    const peer = await rawPeer((n, s) => (n === 1 ? s.write(withLength(DECISION)) : s.destroy()));
    const c = new Client({ url: peer.url, timeoutMs: 5000 });
    try {
      for (let i = 0; i < 4; i++) {
        const r = await c.evaluate("Read");
        assert.equal(r.decision, "allow", `call ${i}: ${r.reason}`);
      }
      assert.equal(peer.connections, 4);
      assert.equal(peer.requests, 7);
    } finally {
      c.close();
      await peer.close();
    }
  });

  test("a connection the server closes while idle is not reused", async () => {
    const peer = await rawPeer((_, s) => {
      s.write(withLength(DECISION));
      setTimeout(() => s.end(), 20);
    });
    const c = new Client({ url: peer.url, timeoutMs: 5000 });
    try {
      for (let i = 0; i < 3; i++) {
        const r = await c.evaluate("Read");
        assert.equal(r.decision, "allow", r.reason);
        await new Promise((r) => setTimeout(r, 80));
      }
      assert.equal(peer.connections, 3);
      assert.equal(peer.requests, 3);
    } finally {
      c.close();
      await peer.close();
    }
  });

  test("maxSockets bounds the connections; calls beyond it wait their turn", async () => {
    const peer = await rawPeer((_, s) => setTimeout(() => s.write(withLength(DECISION)), 2));
    const c = new Client({ url: peer.url, maxSockets: 4, timeoutMs: 5000 });
    try {
      const rs = await Promise.all(Array.from({ length: 100 }, () => c.evaluate("Read")));
      assert.ok(rs.every((r) => r.decision === "allow"));
      assert.equal(peer.connections, 4);
      assert.equal(peer.requests, 100);
    } finally {
      c.close();
      await peer.close();
    }
  });

  test("a timed-out call frees its slot: later calls still get decisions", async () => {
    // The first request on the only allowed connection hangs; later ones answer.
    const peer = await rawPeer((n, s) => {
      if (peer.requests > 1) s.write(withLength(DECISION));
    });
    const c = new Client({ url: peer.url, maxSockets: 1, timeoutMs: 300 });
    try {
      const first = c.evaluate("Read");
      await new Promise((r) => setTimeout(r, 200));
      const [a, b] = await Promise.all([first, c.evaluate("Read")]);
      assert.equal(a.code, SIDECAR_UNAVAILABLE);
      assert.equal(b.decision, "allow", b.reason);
      assert.equal((await c.evaluate("Read")).decision, "allow");
    } finally {
      c.close();
      await peer.close();
    }
  });
});
