// Test helpers: the real toolgate sidecar, started per test file.
import { spawn, execFileSync } from "node:child_process";
import { mkdtempSync, writeFileSync, existsSync, rmSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";

export const here = dirname(fileURLToPath(import.meta.url));
export const repoRoot = resolve(here, "../../..");
export const samplesDir = join(repoRoot, "config/samples");

let binPath;
/** The toolgate binary: TOOLGATE_BIN, else built from the repo into a temp dir. */
export function toolgateBin() {
  if (binPath) return binPath;
  if (process.env.TOOLGATE_BIN) {
    binPath = process.env.TOOLGATE_BIN;
    if (!existsSync(binPath)) throw new Error(`TOOLGATE_BIN=${binPath} does not exist`);
    return binPath;
  }
  const dir = mkdtempSync(join(tmpdir(), "toolgate-ts-bin-"));
  binPath = join(dir, "toolgate");
  execFileSync("go", ["build", "-o", binPath, "./cmd/toolgate"], { cwd: repoRoot, stdio: "inherit" });
  process.on("exit", () => rmSync(dir, { recursive: true, force: true }));
  return binPath;
}

/** A short temp dir (socket paths must stay under 108 bytes). */
export function shortTempDir() {
  const d = mkdtempSync("/tmp/tgts-");
  process.on("exit", () => rmSync(d, { recursive: true, force: true }));
  return d;
}

/** The bundle of every sample Policy and FrozenAgent, written to dir. */
export function samplesBundle(dir) {
  const out = execFileSync(toolgateBin(), ["bundle", "-f", samplesDir], { maxBuffer: 64 << 20 });
  const f = join(dir, "bundle.json");
  writeFileSync(f, out);
  return f;
}

/**
 * Starts the sidecar on a loopback port and a Unix socket. bundleFile
 * undefined: a missing file (no bundle, every decision NO_POLICIES).
 * Resolves once both listeners serve and the bundle is loaded.
 */
export async function startSidecar({ bundleFile, decisionLog = "stdout" } = {}) {
  const dir = shortTempDir();
  const sock = join(dir, "tg.sock");
  const args = [
    "sidecar",
    "--bundle-file", bundleFile ?? join(dir, "missing-bundle.json"),
    "--listen", "127.0.0.1:0",
    "--listen", "unix:" + sock,
    "--decision-log", decisionLog,
  ];
  const proc = spawn(toolgateBin(), args, { stdio: ["ignore", "pipe", "pipe"] });
  const decisions = [];
  createInterface({ input: proc.stdout }).on("line", (line) => {
    try {
      decisions.push(JSON.parse(line));
    } catch {
      // not a decision line
    }
  });
  const stderr = [];
  let tcp, unix, loaded = bundleFile === undefined;
  await new Promise((resolveStart, reject) => {
    const timer = setTimeout(() => reject(new Error("sidecar did not start in 20s:\n" + stderr.join("\n"))), 20_000);
    proc.on("exit", (code) => reject(new Error(`sidecar exited ${code}:\n` + stderr.join("\n"))));
    createInterface({ input: proc.stderr }).on("line", (line) => {
      stderr.push(line);
      if (line.includes('msg="serving decisions"')) {
        const addr = / addr=(\S+)/.exec(line)?.[1];
        if (addr?.startsWith("/")) unix = addr;
        else tcp = addr;
      }
      if (line.includes('msg="bundle loaded"')) loaded = true;
      if (tcp && unix && loaded) {
        clearTimeout(timer);
        resolveStart();
      }
    });
  });
  // One decision before the tests': the first evaluation of a fresh process
  // is the slowest, and on a loaded machine it should not be a test's.
  await fetch(`http://${tcp}/v1/evaluate`, { method: "POST", body: '{"tool_name":"warm-up"}' }).then((r) => r.text(), () => {});
  return {
    proc,
    tcpURL: `http://${tcp}`,
    unixURL: `unix://${unix}`,
    socketPath: unix,
    decisions,
    stderr,
    kill() {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL");
      return new Promise((r) => (proc.exitCode !== null || proc.signalCode !== null ? r() : proc.once("exit", () => r())));
    },
  };
}

/** Waits until pred() is true (polling), or throws after ms. */
export async function waitFor(pred, ms = 5000) {
  const end = Date.now() + ms;
  while (!pred()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** A sample request file, as the sidecar reads it. */
export function sampleRequest(name) {
  return JSON.parse(readFileSync(join(samplesDir, "requests", name), "utf8"));
}

/** The sidecar's decision log line matching pred, waiting for it to arrive. */
export async function decisionLine(sc, pred) {
  await waitFor(() => sc.decisions.some(pred));
  return sc.decisions.find(pred);
}
