// The shared conformance set (config/samples/expected-decisions.json): every
// case without "now", through this client, against the real sidecar on the
// samples' bundle, must decide exactly as expected.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "../dist/index.js";
import { startSidecar, samplesBundle, shortTempDir, samplesDir, sampleRequest } from "./helpers.mjs";

const expected = JSON.parse(readFileSync(join(samplesDir, "expected-decisions.json"), "utf8"));
const cases = expected.cases.filter((c) => !("now" in c));

/** A request file as evaluate() arguments: typed fields mapped, the rest as extra. */
function toCall(req) {
  const { tool_name, session_id, agent_id, framework, tool_use_id, input, args, kwargs, ...extra } = req;
  return [
    tool_name,
    {
      sessionId: session_id,
      agentId: agent_id,
      framework,
      metadata: { input, args, kwargs, toolUseId: tool_use_id },
      extra,
    },
  ];
}

let sc;
before(async () => {
  sc = await startSidecar({ bundleFile: samplesBundle(shortTempDir()), decisionLog: "none" });
});
after(async () => {
  await sc?.kill();
});

for (const transport of ["unix", "tcp"]) {
  test(`conformance over ${transport}: every case without "now"`, async () => {
    assert.ok(cases.length > 0, "no cases read");
    const c = new Client({ url: transport === "unix" ? sc.unixURL : sc.tcpURL, timeoutMs: 5000 });
    let ran = 0;
    try {
      for (const kase of cases) {
        const [tool, opts] = toCall(sampleRequest(kase.request));
        const r = await c.evaluate(tool, opts);
        const e = kase.expect;
        const got = {
          decision: r.decision,
          effect: r.effect,
          matchedPolicyId: r.matchedPolicyId,
          matchedPolicyVersion: r.matchedPolicyVersion,
          matchedRuleId: r.matchedRuleId,
          code: r.code,
        };
        // The seed's mapping: a rule deny's code is the rule's id.
        const want = { ...e, code: e.code === null && e.decision === "deny" && e.matchedRuleId !== null ? e.matchedRuleId : e.code };
        const picked = Object.fromEntries(Object.keys(want).map((k) => [k, got[k]]));
        assert.deepEqual(picked, want, `${kase.request}: ${r.reason}`);
        ran++;
      }
    } finally {
      c.close();
    }
    assert.equal(ran, cases.length);
    assert.equal(ran, expected.cases.filter((k) => !("now" in k)).length);
  });
}
