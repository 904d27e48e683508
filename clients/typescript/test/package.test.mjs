// The package as npm would publish it: packed by `npm pack` from a copy of
// the checkout with no fresh dist/ (so `prepare` must build it and `prepack`
// bring the LICENSE), installed from the tarball into a fresh project with
// --offline (it has no runtime dependencies), then used there as a consumer
// would: import (ESM) and require (CommonJS), each making real calls to the
// real sidecar through the root and a framework sub-path, and type-checked
// by tsc with node16, nodenext and bundler resolution.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, readFileSync, symlinkSync, writeFileSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { startSidecar, samplesBundle, shortTempDir, here, repoRoot } from "./helpers.mjs";

const pkgDir = join(here, "..");
const manifest = JSON.parse(readFileSync(join(pkgDir, "package.json"), "utf8"));
const subpaths = ["mcp", "langchain", "ai", "claude-agent-sdk"];
const tsc = join(pkgDir, "node_modules/typescript/bin/tsc");

function run(cmd, args, cwd, env = {}) {
  try {
    return execFileSync(cmd, args, { cwd, env: { ...process.env, ...env }, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"], maxBuffer: 16 << 20 });
  } catch (e) {
    throw new Error(`${cmd} ${args.join(" ")} (in ${cwd}) failed:\n${e.stdout}\n${e.stderr}`);
  }
}

/** Runs npm offline: nothing here may need the registry. */
function npm(args, cwd) {
  return run("npm", [...args, "--offline", "--no-audit", "--no-fund"], cwd);
}

let sc, tmp, packed, consumer;
before(async () => {
  tmp = shortTempDir();
  // A checkout as git would give it: the files git tracks or would add
  // (dist/ and LICENSE here are ignored), the repository's LICENSE two
  // levels up, and the dev dependencies `make typescript-client` installed.
  const checkout = join(tmp, "checkout/clients/typescript");
  const listed = run("git", ["ls-files", "--cached", "--others", "--exclude-standard", "-z", "."], pkgDir).split("\0").filter(Boolean);
  for (const f of listed) {
    if (!existsSync(join(pkgDir, f))) continue; // deleted, not yet committed
    mkdirSync(dirname(join(checkout, f)), { recursive: true });
    cpSync(join(pkgDir, f), join(checkout, f));
  }
  cpSync(join(repoRoot, "LICENSE"), join(tmp, "checkout/LICENSE"));
  symlinkSync(join(pkgDir, "node_modules"), join(checkout, "node_modules"));
  assert.ok(!existsSync(join(checkout, "dist")) && !existsSync(join(checkout, "LICENSE")), "the copy must start without dist/ and LICENSE");
  // What an earlier build of a since-removed source left: build starts afresh.
  mkdirSync(join(checkout, "dist"));
  writeFileSync(join(checkout, "dist/removed.js"), "export {};\n");

  const out = join(tmp, "out");
  mkdirSync(out);
  // --json: the lifecycle scripts' output goes to stderr, the report to stdout.
  packed = JSON.parse(npm(["pack", "--json", "--pack-destination", out], checkout))[0];

  consumer = join(tmp, "consumer");
  mkdirSync(consumer);
  writeFileSync(join(consumer, "package.json"), JSON.stringify({ name: "toolgate-consumer", version: "0.0.0", private: true }));
  npm(["install", join(out, packed.filename)], consumer);
  // The one adapter that loads its framework at run time (langchain's
  // ToolMessage) needs the peer, which a consumer of that adapter has: the
  // copy pinned in the lockfile, linked so the install stays offline.
  mkdirSync(join(consumer, "node_modules/@langchain"), { recursive: true });
  symlinkSync(join(pkgDir, "node_modules/@langchain/core"), join(consumer, "node_modules/@langchain/core"));

  sc = await startSidecar({ bundleFile: samplesBundle(shortTempDir()), decisionLog: "none" });
});
after(async () => {
  await sc?.kill();
});

test("the tarball holds only dist/ (ESM and CJS), README, LICENSE and package.json", () => {
  const files = packed.files.map((f) => f.path).sort();
  for (const f of files) {
    assert.ok(["package.json", "README.md", "LICENSE"].includes(f) || f.startsWith("dist/"), `unexpected file in the tarball: ${f}`);
  }
  for (const base of ["index", ...subpaths]) {
    for (const f of [`dist/${base}.js`, `dist/${base}.d.ts`, `dist/cjs/${base}.js`, `dist/cjs/${base}.d.ts`]) {
      assert.ok(files.includes(f), `${f} missing from the tarball: ${files.join(", ")}`);
    }
  }
  assert.ok(files.includes("dist/cjs/package.json"), "dist/cjs/package.json marks the CommonJS build");
  assert.ok(!files.includes("dist/removed.js"), "a stale file from an earlier build was packed");
  assert.ok(files.includes("LICENSE"));
  const installed = join(consumer, "node_modules/@toolgate/client");
  assert.equal(readFileSync(join(installed, "LICENSE"), "utf8"), readFileSync(join(repoRoot, "LICENSE"), "utf8"), "the packed LICENSE is the repository's");
  assert.deepEqual(JSON.parse(readFileSync(join(installed, "dist/cjs/package.json"), "utf8")), { type: "commonjs" });
});

test("package.json is publishable: not private, Apache-2.0, metadata, no runtime dependencies", () => {
  const p = JSON.parse(readFileSync(join(consumer, "node_modules/@toolgate/client/package.json"), "utf8"));
  assert.equal(p.private, undefined, "private packages cannot be published");
  assert.equal(p.license, "Apache-2.0");
  for (const k of ["description", "keywords", "homepage", "bugs", "repository", "engines"]) assert.ok(p[k], `package.json has no ${k}`);
  assert.equal(p.repository.directory, "clients/typescript");
  assert.deepEqual(p.dependencies ?? {}, {}, "runtime dependencies would need the registry on install");
  assert.equal(p.scripts.prepare, "npm run build");
});

test("engines claims no Node.js older than a framework adapter's peer needs", () => {
  const floor = (range) => Number(/^>=\s*(\d+)/.exec(range)?.[1]);
  const ours = floor(manifest.engines.node);
  assert.ok(ours > 0, `engines.node ${manifest.engines.node} is not ">=N"`);
  assert.ok(Number(process.versions.node.split(".")[0]) >= ours, "the tests run on a Node.js the package claims");
  for (const peer of Object.keys(manifest.peerDependencies)) {
    const theirs = JSON.parse(readFileSync(join(pkgDir, "node_modules", peer, "package.json"), "utf8")).engines?.node;
    if (!theirs) continue;
    assert.ok(ours >= floor(theirs), `engines.node ${manifest.engines.node}, but ${peer} needs ${theirs}`);
  }
});

// One consumer program, written once per module system: resolves the
// package, decides an allow and a rule deny over the sidecar (TOOLGATE_URL),
// runs a Vercel AI SDK tool through the "./ai" sub-path (its deny thrown as
// ToolDeniedError), and lists every sub-path's exports.
function program(kind) {
  const load = (spec) => (kind === "esm" ? `await import(${JSON.stringify(spec)})` : `require(${JSON.stringify(spec)})`);
  const resolve = kind === "esm" ? "import.meta.resolve" : "require.resolve";
  const body = `
  const root = ${load("@toolgate/client")};
  const ai = ${load("@toolgate/client/ai")};
  const exportsOf = {};
  for (const s of ${JSON.stringify(subpaths)}) exportsOf[s] = Object.keys(${kind === "esm" ? "await import(\"@toolgate/client/\" + s)" : "require(\"@toolgate/client/\" + s)"}).sort();
  const c = new root.Client({ timeoutMs: 5000 });
  const who = { agentId: "coder-1", sessionId: "s-1" };
  const deny = await c.evaluate("Bash", { ...who, metadata: { input: { command: "rm -rf /" } } });
  const allow = await c.evaluate("Bash", { ...who, metadata: { input: { command: "ls -la src/" } } });
  const tools = ai.guardTools({ Bash: { execute: async ({ command }) => "ran " + command } }, c, who);
  let aiDeny = null;
  try {
    await tools.Bash.execute({ command: "rm -rf /" }, { toolCallId: "c1", messages: [] });
  } catch (e) {
    aiDeny = { isToolDenied: e instanceof ai.ToolDeniedError, code: e.result?.code };
  }
  const aiAllow = await tools.Bash.execute({ command: "ls -la src/" }, { toolCallId: "c2", messages: [] });
  c.close();
  console.log(JSON.stringify({ resolved: ${resolve}("@toolgate/client"), rootExports: Object.keys(root).sort(), exportsOf, deny, allow, aiDeny, aiAllow }));`;
  return kind === "esm" ? body : `(async () => {${body}\n})().catch((e) => { console.error(e); process.exit(1); });\n`;
}

// Node.js 20.19 and later can require() an ES module; 20.0 to 20.18, which
// engines also claims, cannot (ERR_REQUIRE_ESM). The CommonJS consumer runs
// as they do, so only a real CommonJS build passes.
const noRequireESM = process.allowedNodeEnvironmentFlags.has("--experimental-require-module") ? ["--no-experimental-require-module"] : [];

const consumed = {};
for (const [kind, file, dir] of [
  ["esm", "consumer.mjs", "dist/index.js"],
  ["cjs", "consumer.cjs", "dist/cjs/index.js"],
]) {
  test(`${kind === "esm" ? "import" : "require"}("@toolgate/client") from the installed tarball decides against the real sidecar`, () => {
    writeFileSync(join(consumer, file), program(kind));
    const out = JSON.parse(run(process.execPath, [...(kind === "cjs" ? noRequireESM : []), file], consumer, { TOOLGATE_URL: sc.unixURL }));
    consumed[kind] = out;
    const resolved = out.resolved.replace(/^file:\/\//, "");
    assert.ok(resolved.endsWith(join("node_modules/@toolgate/client", dir)), `${kind} resolved ${resolved}, want ${dir}`);
    assert.equal(out.allow.decision, "allow", out.allow.reason);
    assert.equal(out.allow.matchedRuleId, "read-only-shell");
    assert.equal(out.deny.decision, "deny");
    // A rule deny's code is the rule's id, as in the Go and Python clients.
    assert.equal(out.deny.code, "no-rm-rf");
    assert.equal(out.deny.matchedRuleId, "no-rm-rf");
    assert.equal(out.deny.reason, "rm -rf is blocked; delete specific files, or ask a human");
    assert.deepEqual(out.aiDeny, { isToolDenied: true, code: "no-rm-rf" });
    assert.equal(out.aiAllow, "ran ls -la src/");
    assert.ok(out.rootExports.includes("Client") && out.rootExports.includes("SIDECAR_UNAVAILABLE"));
    for (const s of subpaths) assert.ok(out.exportsOf[s].length > 0, `@toolgate/client/${s} exports nothing`);
  });
}

test("the ESM and CJS builds export the same names on every entry point", () => {
  assert.ok(consumed.esm && consumed.cjs, "the import and require tests ran first");
  assert.deepEqual(consumed.cjs.rootExports, consumed.esm.rootExports);
  assert.deepEqual(consumed.cjs.exportsOf, consumed.esm.exportsOf);
});

// Types as a consumer's tsc resolves them. The @ts-expect-error lines fail
// the check (unused directive) if the types resolved to any.
const typeUse = (importLine) => `${importLine}
export async function use(): Promise<string> {
  const c = new Client({ url: "unix:///var/run/toolgate/toolgate.sock", timeoutMs: 500 });
  const r: EvaluationResult = await c.evaluate("Bash", { metadata: { input: { command: "ls" } } });
  // @ts-expect-error: decision is "allow" | "deny" | "ask"
  const wrong: "maybe" = r.decision;
  void wrong;
  const code: string | null = r.code;
  const guarded = guardTools({}, c, { sessionId: "s-1" });
  void guarded;
  // @ts-expect-error: evaluate takes a tool name first
  void c.evaluate(42);
  return \`\${r.decision} \${code ?? SIDECAR_UNAVAILABLE} \${typeof ToolDeniedError} \${typeof guardMcpClient} \${typeof toolgateCanUseTool} \${typeof guardLangChainTools}\`;
}
`;
const importLines = `import { Client, SIDECAR_UNAVAILABLE, type EvaluationResult } from "@toolgate/client";
import { guardTools, ToolDeniedError } from "@toolgate/client/ai";
import { guardMcpClient } from "@toolgate/client/mcp";
import { guardTools as guardLangChainTools } from "@toolgate/client/langchain";
import { toolgateCanUseTool } from "@toolgate/client/claude-agent-sdk";`;

/** tsc --noEmit with these options on these files in dir; returns the files it read. */
function typecheck(dir, compilerOptions, files) {
  mkdirSync(dir, { recursive: true });
  for (const [name, text] of Object.entries(files)) writeFileSync(join(dir, name), text);
  writeFileSync(
    join(dir, "tsconfig.json"),
    JSON.stringify({ compilerOptions: { strict: true, noEmit: true, target: "ES2022", lib: ["ES2022"], types: [], skipLibCheck: true, ...compilerOptions }, files: Object.keys(files) }),
  );
  return run(process.execPath, [tsc, "-p", ".", "--listFiles"], dir).split("\n");
}

for (const resolution of ["node16", "nodenext"]) {
  test(`types resolve with moduleResolution ${resolution}: ESM (.mts) from dist/, CommonJS (.cts) from dist/cjs`, () => {
    const read = typecheck(join(consumer, "types-" + resolution), { module: resolution, moduleResolution: resolution }, {
      "esm.mts": typeUse(importLines),
      "cjs.cts": typeUse(importLines),
    });
    const ours = read.filter((f) => f.includes("node_modules/@toolgate/client/"));
    for (const base of ["index", ...subpaths]) {
      assert.ok(ours.some((f) => f.endsWith(`/@toolgate/client/dist/${base}.d.ts`)), `${base}: no ESM types read: ${ours.join(" ")}`);
      assert.ok(ours.some((f) => f.endsWith(`/@toolgate/client/dist/cjs/${base}.d.ts`)), `${base}: no CJS types read: ${ours.join(" ")}`);
    }
  });
}

test("types resolve with moduleResolution bundler (the import condition)", () => {
  const read = typecheck(join(consumer, "types-bundler"), { module: "preserve", moduleResolution: "bundler" }, { "app.ts": typeUse(importLines) });
  const ours = read.filter((f) => f.includes("node_modules/@toolgate/client/"));
  for (const base of ["index", ...subpaths]) {
    assert.ok(ours.some((f) => f.endsWith(`/@toolgate/client/dist/${base}.d.ts`)), `${base}: no types read: ${ours.join(" ")}`);
  }
  assert.ok(!ours.some((f) => f.includes("/dist/cjs/")), "a bundler build reads the ESM types");
});

test("prepack brings the repository's LICENSE, keeps a packed one, and fails clearly with neither", () => {
  const script = readFileSync(join(pkgDir, "scripts/license.mjs"));
  const root = join(shortTempDir(), "repo");
  const pkg = join(root, "clients/typescript");
  mkdirSync(join(pkg, "scripts"), { recursive: true });
  writeFileSync(join(pkg, "scripts/license.mjs"), script);
  const prepack = () => execFileSync(process.execPath, ["scripts/license.mjs"], { cwd: pkg, encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });

  assert.throws(prepack, (e) => e.status === 1 && /no LICENSE/.test(e.stderr), "packing without any LICENSE must fail");
  assert.ok(!existsSync(join(pkg, "LICENSE")));

  writeFileSync(join(pkg, "LICENSE"), "the packed one\n");
  prepack();
  assert.equal(readFileSync(join(pkg, "LICENSE"), "utf8"), "the packed one\n", "an unpacked tarball keeps its LICENSE");

  writeFileSync(join(root, "LICENSE"), "the repository's\n");
  prepack();
  assert.equal(readFileSync(join(pkg, "LICENSE"), "utf8"), "the repository's\n", "a checkout packs the repository's LICENSE");
});
