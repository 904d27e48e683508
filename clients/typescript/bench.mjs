#!/usr/bin/env node
// End-to-end evaluate() latency on one kept-alive client:
//   node bench.mjs --url unix:///tmp/tg.sock --n 20000 [--warmup 2000]
// prints one line: node <unix|tcp> n=N p50=..us p99=..us
import { Client } from "./dist/index.js";

function flag(name, def) {
  const i = process.argv.indexOf(`--${name}`);
  if (i < 0) return def;
  const v = process.argv[i + 1];
  if (v === undefined) throw new Error(`--${name} needs a value`);
  return v;
}

const url = flag("url", process.env.TOOLGATE_URL ?? "");
const n = Number(flag("n", "20000"));
const warmup = Number(flag("warmup", String(Math.min(5000, Math.max(1000, n / 10)))));
if (!url) throw new Error("--url is required (unix:///path.sock or http://host:port)");
if (!(n > 0)) throw new Error("--n must be positive");

// The 1000-rule bundle's request that hits rule 500.
const tool = "tool_500";
const opts = { agentId: "agent-1", metadata: { input: { command: "run danger_500 now" }, kwargs: { amount: 5000 } } };

const client = new Client({ url, timeoutMs: 2000 });
const transport = url.startsWith("unix:") ? "unix" : "tcp";

const first = await client.evaluate(tool, opts);
if (first.code === "SIDECAR_UNAVAILABLE") {
  console.error(first.reason);
  process.exit(1);
}
for (let i = 0; i < warmup; i++) await client.evaluate(tool, opts);

const samples = new Float64Array(n);
for (let i = 0; i < n; i++) {
  const t0 = process.hrtime.bigint();
  const r = await client.evaluate(tool, opts);
  samples[i] = Number(process.hrtime.bigint() - t0) / 1000;
  if (r.code === "SIDECAR_UNAVAILABLE") {
    console.error(r.reason);
    process.exit(1);
  }
}
client.close();
samples.sort();
const q = (p) => samples[Math.min(n - 1, Math.floor(p * n))];
console.log(`node ${transport} n=${n} p50=${q(0.5).toFixed(1)}us p99=${q(0.99).toFixed(1)}us`);
