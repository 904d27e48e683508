// The client against the real sidecar (and, for broken peers, tiny local
// servers that play a sidecar that hangs or answers garbage).
import { test, before, after, describe } from "node:test";
import assert from "node:assert/strict";
import * as http from "node:http";
import * as net from "node:net";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { Client, SIDECAR_UNAVAILABLE, DEFAULT_URL, DEFAULT_SOCKET, ENV_URL } from "../dist/index.js";
import { startSidecar, samplesBundle, shortTempDir, waitFor } from "./helpers.mjs";

const RM_RF = { agentId: "coder-1", sessionId: "s-1", metadata: { input: { command: "rm -rf /" } } };
const LS = { agentId: "coder-1", sessionId: "s-1", metadata: { input: { command: "ls -la src/" } } };

let sc;
before(async () => {
  sc = await startSidecar({ bundleFile: samplesBundle(shortTempDir()) });
});
after(async () => {
  await sc?.kill();
});

/** Runs fn with TOOLGATE_URL set to v (undefined: unset), then restores it. */
function withEnv(v, fn) {
  const old = process.env[ENV_URL];
  if (v === undefined) delete process.env[ENV_URL];
  else process.env[ENV_URL] = v;
  try {
    return fn();
  } finally {
    if (old === undefined) delete process.env[ENV_URL];
    else process.env[ENV_URL] = old;
  }
}

/** A local server playing a broken peer; handler(req, res) or a raw net handler. */
async function brokenPeer(handler) {
  const server = http.createServer(handler);
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${server.address().port}`;
  return {
    url,
    close: () => {
      server.closeAllConnections?.();
      return new Promise((r) => server.close(() => r()));
    },
  };
}

describe("decisions from the sidecar", () => {
  for (const transport of ["unix", "tcp"]) {
    test(`allow and rule deny over ${transport}`, async () => {
      const c = new Client({ url: transport === "unix" ? sc.unixURL : sc.tcpURL, timeoutMs: 5000 });
      try {
        assert.equal(c.url, transport === "unix" ? sc.unixURL : sc.tcpURL);
        const allow = await c.evaluate("Bash", LS);
        assert.equal(allow.decision, "allow", allow.reason);
        assert.equal(allow.effect, "allow");
        assert.equal(allow.code, null);
        assert.equal(allow.matchedPolicyId, "default-deny-readonly");
        assert.equal(allow.matchedPolicyVersion, 1);
        assert.equal(allow.matchedRuleId, "read-only-shell");
        assert.match(allow.bundleRevision, /^sha256:[0-9a-f]{64}$/);
        assert.ok(allow.decisionId);
        assert.equal(typeof allow.latencyMs, "number");
        assert.deepEqual(allow.warnings, []);

        const deny = await c.evaluate("Bash", RM_RF);
        assert.equal(deny.decision, "deny", deny.reason);
        assert.equal(deny.effect, "deny");
        // The seed: a rule deny's code is the rule id, its reason the description.
        assert.equal(deny.code, "no-rm-rf");
        assert.equal(deny.matchedRuleId, "no-rm-rf");
        assert.equal(deny.matchedPolicyId, "bash-no-rm-rf");
        assert.equal(deny.reason, "rm -rf is blocked; delete specific files, or ask a human");
      } finally {
        c.close();
      }
    });
  }

  test("a frozen agent is denied AGENT_FROZEN (the sidecar's code passes through)", async () => {
    const c = new Client({ url: sc.unixURL, timeoutMs: 5000 });
    const r = await c.evaluate("Read", { agentId: "Billing-Bot-7", metadata: { input: { file_path: "/workspace/README.md" } } });
    c.close();
    assert.equal(r.decision, "deny");
    assert.equal(r.code, "AGENT_FROZEN");
    assert.equal(r.matchedRuleId, null);
    assert.match(r.reason, /INC-1042/);
  });

  test("args and kwargs reach policies (pay cap)", async () => {
    const c = new Client({ url: sc.tcpURL, timeoutMs: 5000 });
    const small = await c.evaluate("pay", { agentId: "shop-agent", framework: "langchain", metadata: { args: [], kwargs: { amount: 250, currency: "EUR" } } });
    const over = await c.evaluate("pay", { agentId: "shop-agent", metadata: { kwargs: { amount: 5000, currency: "EUR" } } });
    c.close();
    assert.equal(small.decision, "allow");
    // kwargs.amount reached pay-over-cap, which asks; this sidecar serves a
    // bundle file and cannot ask, so it denies naming the rule.
    assert.equal(over.decision, "deny");
    assert.equal(over.matchedRuleId, "pay-over-cap");
    assert.equal(over.code, "APPROVAL_UNAVAILABLE");
  });

  test("extra fields reach the sidecar (roles, side_effect)", async () => {
    const c = new Client({ url: sc.unixURL, timeoutMs: 5000 });
    const r = await c.evaluate("mcp__db__execute", { agentId: "etl-bot", extra: { roles: ["etl"], side_effect: "write" }, metadata: { input: { sql: "INSERT INTO orders VALUES (1)" } } });
    const without = await c.evaluate("mcp__db__execute", { agentId: "etl-bot", metadata: { input: { sql: "INSERT INTO orders VALUES (1)" } } });
    c.close();
    assert.equal(r.decision, "allow");
    assert.equal(r.effect, "audit");
    assert.equal(r.matchedRuleId, "writes-audited");
    assert.notEqual(without.matchedRuleId, "writes-audited");
  });

  test("traceparent reaches the decision log (trace_id, span_id)", async () => {
    const c = new Client({ url: sc.unixURL, timeoutMs: 5000 });
    const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const r = await c.evaluate("Bash", { ...LS, traceparent: tp });
    const r2 = await c.evaluate("Bash", { ...LS, traceparent: { traceparent: "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" } });
    const r3 = await c.evaluate("Bash", LS);
    c.close();
    const line = (id) => sc.decisions.find((d) => d.decision_id === id);
    await waitFor(() => line(r.decisionId) && line(r2.decisionId) && line(r3.decisionId));
    assert.equal(line(r.decisionId).trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
    assert.equal(line(r.decisionId).span_id, "00f067aa0ba902b7");
    assert.equal(line(r.decisionId).session_id, "s-1");
    assert.equal(line(r2.decisionId).trace_id, "0af7651916cd43dd8448eb211c80319c");
    assert.equal(line(r3.decisionId).trace_id, undefined);
  });

  test("keep-alive: 50 sequential calls use one connection", async () => {
    let accepted = 0;
    const [host, port] = sc.tcpURL.slice("http://".length).split(":");
    const proxy = net.createServer((down) => {
      accepted++;
      const up = net.connect(Number(port), host);
      down.pipe(up).pipe(down);
      down.on("error", () => up.destroy());
      up.on("error", () => down.destroy());
    });
    await new Promise((r) => proxy.listen(0, "127.0.0.1", r));
    const c = new Client({ url: `http://127.0.0.1:${proxy.address().port}`, timeoutMs: 5000 });
    try {
      for (let i = 0; i < 50; i++) {
        const r = await c.evaluate("Bash", i % 2 ? LS : RM_RF);
        assert.equal(r.decision, i % 2 ? "allow" : "deny");
      }
      assert.equal(accepted, 1, "every call after the first must reuse the kept-alive connection");
    } finally {
      c.close();
      await new Promise((r) => proxy.close(() => r()));
    }
  });

  test("concurrency: 200 calls in flight on one client each get their own decision", async () => {
    const c = new Client({ url: sc.unixURL, timeoutMs: 5000 });
    try {
      const calls = [];
      for (let i = 0; i < 200; i++) {
        const deny = i % 3 === 0;
        calls.push(
          c.evaluate(deny ? "Bash" : "Read", deny ? RM_RF : { agentId: "coder-1", sessionId: `s-${i}`, metadata: { input: { file_path: `/workspace/f${i}` } } }).then((r) => [deny, r]),
        );
      }
      const results = await Promise.all(calls);
      const ids = new Set();
      for (const [deny, r] of results) {
        assert.equal(r.decision, deny ? "deny" : "allow", JSON.stringify(r));
        assert.notEqual(r.code, SIDECAR_UNAVAILABLE);
        ids.add(r.decisionId);
      }
      assert.equal(ids.size, 200);
    } finally {
      c.close();
    }
  });

  test("the client works again after close()", async () => {
    const c = new Client({ url: sc.tcpURL, timeoutMs: 5000 });
    assert.equal((await c.evaluate("Bash", LS)).decision, "allow");
    c.close();
    assert.equal((await c.evaluate("Bash", LS)).decision, "allow");
    c.close();
  });
});

describe("no bundle", () => {
  test("every decision is deny NO_POLICIES", async () => {
    const empty = await startSidecar({ decisionLog: "none" });
    const c = new Client({ url: empty.unixURL, timeoutMs: 5000 });
    try {
      const r = await c.evaluate("Read", { metadata: { input: { file_path: "/x" } } });
      assert.equal(r.decision, "deny");
      assert.equal(r.code, "NO_POLICIES");
      assert.equal(r.matchedRuleId, null);
    } finally {
      c.close();
      await empty.kill();
    }
  });
});

describe("fail closed", () => {
  test("sidecar killed mid-run: deny SIDECAR_UNAVAILABLE, never a rejection", async () => {
    const doomed = await startSidecar({ bundleFile: samplesBundle(shortTempDir()), decisionLog: "none" });
    const viaUnix = new Client({ url: doomed.unixURL, timeoutMs: 5000 });
    const viaTcp = new Client({ url: doomed.tcpURL, timeoutMs: 5000 });
    try {
      assert.equal((await viaUnix.evaluate("Bash", LS)).decision, "allow");
      assert.equal((await viaTcp.evaluate("Bash", LS)).decision, "allow");
      await doomed.kill();
      for (const c of [viaUnix, viaTcp]) {
        for (let i = 0; i < 3; i++) {
          const r = await c.evaluate("Bash", LS);
          assert.equal(r.decision, "deny");
          assert.equal(r.effect, "deny");
          assert.equal(r.code, SIDECAR_UNAVAILABLE);
          assert.match(r.reason, /gave no decision, denied \(fail closed\)/);
          assert.equal(r.matchedPolicyId, null);
        }
      }
      assert.equal(viaUnix.failOpenCount, 0);
    } finally {
      viaUnix.close();
      viaTcp.close();
    }
  });

  test("unreachable: a missing socket and a closed port", async () => {
    const dir = shortTempDir();
    for (const url of [`unix://${join(dir, "nobody.sock")}`, "http://127.0.0.1:1"]) {
      const c = new Client({ url });
      const r = await c.evaluate("Bash", LS);
      c.close();
      assert.equal(r.decision, "deny", url);
      assert.equal(r.code, SIDECAR_UNAVAILABLE);
      assert.ok(r.reason.includes(c.url), r.reason);
    }
  });

  test("failOpen allows, logs and counts each", async () => {
    const warned = [];
    const c = new Client({ url: `unix://${join(shortTempDir(), "nobody.sock")}`, failOpen: true, logger: { warn: (m) => warned.push(m) } });
    const live = new Client({ url: sc.unixURL, timeoutMs: 5000, failOpen: true, logger: { warn: (m) => warned.push(m) } });
    try {
      for (let i = 1; i <= 3; i++) {
        const r = await c.evaluate("Bash", RM_RF);
        assert.equal(r.decision, "allow");
        assert.equal(r.effect, "allow");
        assert.equal(r.code, SIDECAR_UNAVAILABLE);
        assert.match(r.reason, /allowed \(fail open\)/);
        assert.equal(c.failOpenCount, i);
      }
      assert.equal(warned.length, 3);
      // A real deny is never turned into an allow by failOpen.
      const deny = await live.evaluate("Bash", RM_RF);
      assert.equal(deny.decision, "deny");
      assert.equal(deny.code, "no-rm-rf");
      assert.equal(live.failOpenCount, 0);
      assert.equal(warned.length, 3);
    } finally {
      c.close();
      live.close();
    }
  });

  test("timeout: a peer that never answers is a deny within timeoutMs", async () => {
    const hung = [];
    const peer = await brokenPeer((req) => hung.push(req)); // reads, never answers
    const rawSockets = [];
    const raw = net.createServer((s) => rawSockets.push(s)); // accepts, never reads nor answers
    await new Promise((r) => raw.listen(0, "127.0.0.1", r));
    try {
      for (const url of [peer.url, `http://127.0.0.1:${raw.address().port}`]) {
        const c = new Client({ url, timeoutMs: 150 });
        const t0 = performance.now();
        const r = await c.evaluate("Bash", LS);
        const took = performance.now() - t0;
        c.close();
        assert.equal(r.decision, "deny");
        assert.equal(r.code, SIDECAR_UNAVAILABLE);
        assert.match(r.reason, /no answer within 150ms/);
        assert.ok(took >= 140 && took < 1500, `took ${took}ms`);
      }
      const open = new Client({ url: peer.url, timeoutMs: 100, failOpen: true, logger: { warn() {} } });
      const r = await open.evaluate("Bash", LS);
      open.close();
      assert.equal(r.decision, "allow");
      assert.equal(open.failOpenCount, 1);
    } finally {
      await peer.close();
      for (const s of rawSockets) s.destroy();
      await new Promise((r) => raw.close(() => r()));
    }
  });

  test("malformed answers: non-200, {}, non-JSON, decision maybe, not an object, too large", async () => {
    const answers = {
      "/500": [500, '{"error":"boom"}'],
      "/404": [404, "not found"],
      "/400": [400, '{"error":"tool_name is required"}'],
      "/empty": [200, "{}"],
      "/nonjson": [200, "<html>proxy error</html>"],
      "/maybe": [200, '{"decision":"maybe","effect":"allow"}'],
      "/array": [200, '[{"decision":"allow"}]'],
      "/null": [200, "null"],
      "/huge": [200, '{"decision":"allow","reason":"' + "x".repeat(5 << 20) + '"}'],
      "/ok": [200, '{"decision":"allow","effect":"warn","matchedPolicyId":null,"matchedPolicyVersion":null,"matchedRuleId":null,"latencyMs":0.01,"warnings":["w1"]}'],
    };
    const peer = await brokenPeer((req, res) => {
      const prefix = req.url.slice(0, -"/v1/evaluate".length);
      assert.equal(req.method, "POST");
      let body = "";
      req.on("data", (d) => (body += d));
      req.on("end", () => {
        assert.equal(JSON.parse(body).tool_name, "Bash");
        const [status, text] = answers[prefix];
        res.writeHead(status, { "Content-Type": "application/json" });
        res.end(text);
      });
    });
    try {
      for (const [prefix, [status]] of Object.entries(answers)) {
        const c = new Client({ url: peer.url + prefix, timeoutMs: 5000 });
        const r = await c.evaluate("Bash", LS);
        c.close();
        if (prefix === "/ok") {
          assert.equal(r.decision, "allow");
          assert.equal(r.effect, "warn");
          assert.deepEqual(r.warnings, ["w1"]);
          assert.equal(r.code, null);
          continue;
        }
        assert.equal(r.decision, "deny", prefix);
        assert.equal(r.code, SIDECAR_UNAVAILABLE, prefix);
        if (status !== 200) assert.match(r.reason, new RegExp(`status ${status}`), prefix);
      }
      const c = new Client({ url: peer.url + "/500", timeoutMs: 5000 });
      assert.match((await c.evaluate("Bash", LS)).reason, /status 500: boom/);
      assert.match((await c.evaluate("Bash", LS)).reason, /status 500: boom/);
      c.close();
      const m = new Client({ url: peer.url + "/maybe", timeoutMs: 5000 });
      assert.match((await m.evaluate("Bash", LS)).reason, /decision is "maybe", not allow, deny or ask/);
      m.close();
    } finally {
      await peer.close();
    }
  });
});

describe("URLs and discovery", () => {
  test("bad URLs are a TypeError naming the setting", () => {
    for (const url of ["ftp://host:1", "unix:relative.sock", "unix://relative.sock", "http://", "127.0.0.1:8181", "http://u:p@host:1", "http://host:1/?q=1", "http://host:1/#f", "not a url"]) {
      assert.throws(() => new Client({ url }), (e) => e instanceof TypeError && /ClientOptions\.url/.test(e.message), url);
    }
    withEnv("tcp://127.0.0.1:8181", () => {
      assert.throws(() => new Client(), (e) => e instanceof TypeError && e.message.includes("TOOLGATE_URL"));
    });
    for (const timeoutMs of [0, -1, Number.NaN, "5"]) {
      assert.throws(() => new Client({ url: sc.tcpURL, timeoutMs }), TypeError);
    }
  });

  test("URL forms", () => {
    assert.equal(new Client({ url: "unix:///tmp/x.sock" }).url, "unix:///tmp/x.sock");
    assert.equal(new Client({ url: "unix:/tmp/x.sock" }).url, "unix:///tmp/x.sock");
    assert.equal(new Client({ url: "http://127.0.0.1:8181/" }).url, "http://127.0.0.1:8181");
    assert.equal(new Client({ url: "http://localhost:9/prefix/" }).url, "http://localhost:9/prefix");
    assert.equal(new Client({ url: "https://sidecar.example:8443" }).url, "https://sidecar.example:8443");
  });

  test("discovery order: explicit URL, TOOLGATE_URL, the socket, 127.0.0.1:8181", async () => {
    await withEnv(sc.unixURL, async () => {
      const fromEnv = new Client({ timeoutMs: 5000 });
      assert.equal(fromEnv.url, sc.unixURL);
      assert.equal((await fromEnv.evaluate("Bash", LS)).decision, "allow");
      fromEnv.close();
      assert.equal(new Client({ url: sc.tcpURL, timeoutMs: 5000 }).url, sc.tcpURL);
    });
    withEnv(undefined, () => {
      const d = new Client();
      assert.equal(d.url, existsSync(DEFAULT_SOCKET) ? "unix://" + DEFAULT_SOCKET : DEFAULT_URL);
    });
    withEnv("", () => {
      assert.equal(new Client({ url: "" }).url, existsSync(DEFAULT_SOCKET) ? "unix://" + DEFAULT_SOCKET : DEFAULT_URL);
    });
  });

  test("an empty toolName is a TypeError, not a decision", async () => {
    const c = new Client({ url: sc.tcpURL, timeoutMs: 5000 });
    await assert.rejects(c.evaluate(""), TypeError);
    await assert.rejects(c.evaluate(undefined), TypeError);
    const cyclic = {};
    cyclic.self = cyclic;
    await assert.rejects(c.evaluate("Bash", { metadata: { input: cyclic } }), TypeError);
    c.close();
  });
});
