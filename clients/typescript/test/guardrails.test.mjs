// The fields of cluster-wide guardrails (docs/guardrails.md,
// docs/exceptions.md), read from the real sidecar deciding config/guardrails
// as the operator would publish it for namespace payments (team=payments).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import { Client } from "../dist/index.js";
import { startSidecar, shortTempDir, samplesDir, toolgateBin } from "./helpers.mjs";

let sc;
before(async () => {
  const out = execFileSync(toolgateBin(), ["bundle", "-f", join(samplesDir, "..", "guardrails"), "-n", "payments",
    "--namespace-labels", "team=payments", "--now", "2026-12-01T10:00:00Z"], { maxBuffer: 64 << 20 });
  const f = join(shortTempDir(), "bundle.json");
  writeFileSync(f, out);
  sc = await startSidecar({ bundleFile: f, decisionLog: "none" });
});
after(async () => {
  await sc?.kill();
});

test("matchedPolicyKind, exceptionApplied and shadow", async () => {
  const c = new Client({ url: sc.unixURL, timeoutMs: 5000 });
  try {
    let r = await c.evaluate("Bash", { agentId: "bot", metadata: { input: { command: "rm -rf /data" } } });
    assert.equal(r.decision, "deny");
    assert.equal(r.matchedPolicyKind, "ClusterPolicy");
    assert.equal(r.exceptionApplied, null);
    r = await c.evaluate("Bash", { agentId: "bot", metadata: { input: { command: "curl x" } } });
    assert.equal(r.decision, "allow");
    assert.equal(r.matchedPolicyKind, "Policy");
    assert.deepEqual(r.shadow, [{ kind: "ClusterPolicy", policy: "no-curl-candidate", decision: "deny", rule: "no-curl" }]);
    // The exception's expiresAt is judged on the sidecar's own clock.
    const inForce = Date.now() < Date.parse("2026-12-15T00:00:00Z");
    r = await c.evaluate("Bash", { agentId: "migration-bot", metadata: { input: { command: "rm -rf /old" } } });
    assert.equal(r.decision, inForce ? "allow" : "deny");
    assert.equal(r.exceptionApplied, inForce ? "storage-migration" : null);
  } finally {
    c.close();
  }
});
