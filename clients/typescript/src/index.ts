/**
 * @toolgate/client: ask the toolgate sidecar whether an agent's tool call may
 * run. One hot-path call, `client.evaluate(toolName, {...})`, over kept-alive
 * HTTP/1.1 connections (TCP or the sidecar's Unix socket). It never rejects
 * because of the sidecar: when the sidecar gives no decision the result is a
 * deny with code SIDECAR_UNAVAILABLE (fail closed), or an allow with that
 * code when `failOpen` is set.
 */
import { existsSync } from "node:fs";
import { Pool } from "./conn.js";

/** Where the sidecar is found when nothing names it. */
export const DEFAULT_SOCKET = "/var/run/toolgate/toolgate.sock";
export const DEFAULT_URL = "http://127.0.0.1:8181";
/** The environment variable naming the sidecar for every client. */
export const ENV_URL = "TOOLGATE_URL";
/** One call's bound: the sidecar decides in microseconds. */
export const DEFAULT_TIMEOUT_MS = 500;
/** Most connections per client, under the sidecar's default --max-evaluations (32). */
export const DEFAULT_MAX_SOCKETS = 16;
/** The code of a result the client made itself: the sidecar gave no decision. */
export const SIDECAR_UNAVAILABLE = "SIDECAR_UNAVAILABLE";
/**
 * How long a guard waits, by default, for a person to approve a call an ask
 * rule decided: the longest approval timeout a rule may set (one hour), so
 * the rule's own timeout, the sidecar's cap, decides.
 */
export const GUARD_WAIT_MS = 3_600_000;

// A call's decision is well under 1 KiB; a result's carries the output as
// delivered, at most the sidecar's request limit (1 MiB) grown by its
// redaction marks.
const MAX_ANSWER = 4 << 20;

/**
 * What to do: run the tool only on "allow". "ask": an ask rule decided and
 * no one has approved the call yet (EvaluationResult.approval names the
 * ApprovalRequest); it is not an allow.
 */
export type Decision = "allow" | "deny" | "ask";
export type Effect = "allow" | "deny" | "ask" | "warn" | "audit" | "redact";

/**
 * What a tool returned, as result rules read it (output.text,
 * output.structured.<path>, output.isError, output.size): buildOutput makes
 * it from a tool's return value, mcpOutput from an MCP CallToolResult.
 */
export interface Output {
  /** The text rules on output.text read. */
  text?: string;
  /** Structured content, rules on output.structured.<path> read. */
  structured?: unknown;
  isError?: boolean;
  /** The text's length in UTF-8 bytes. */
  size?: number;
}

/** One span of output.text a redact decision replaced: UTF-8 byte offsets [start, end). */
export interface Redaction {
  start: number;
  end: number;
  policyId: string;
  ruleId: string;
}

/** Per result rule that ran: whether it held, its score, and why. */
export interface Explanation {
  policyId: string;
  ruleId: string;
  effect: Effect;
  passed: boolean;
  score: number;
  /** 1-based: the condition the explanation is about. */
  condition?: number;
  explanation?: string;
}

/** The ApprovalRequest an asked call waits on. */
export interface Approval {
  name: string;
  namespace: string;
  /** RFC 3339, UTC: past it the request can no longer be approved. */
  expiresAt: string;
}

/** The call's arguments, in the shape its framework has them. */
export interface EvaluationMetadata {
  /** The arguments as one object (MCP, Claude Agent SDK, Vercel AI SDK). */
  input?: unknown;
  /** Positional arguments (LangChain, plain functions). */
  args?: unknown[];
  /** Keyword arguments (LangChain, plain functions). */
  kwargs?: Record<string, unknown>;
  /** The framework's id of this tool call, logged with the decision. */
  toolUseId?: string;
}

export interface EvaluateOptions {
  /** Groups decisions in the decision log (per conversation is common). */
  sessionId?: string;
  agentId?: string;
  metadata?: EvaluationMetadata;
  /** Tag for the decision log; the adapters set it. */
  framework?: string;
  /**
   * A W3C traceparent (or an object carrying one), sent as the traceparent
   * header: the sidecar's decision log line gets its trace_id and span_id.
   */
  traceparent?: string | { traceparent?: string } | null;
  /**
   * Any other request field policies read (roles, side_effect, resources,
   * ...). The typed fields above win over the same key here.
   */
  extra?: Record<string, unknown>;
  /**
   * How long the sidecar may hold the answer of a call an ask rule decides,
   * waiting for a person to approve or deny it (capped at the rule's
   * approval timeout): the answer is then an allow, or a deny with code
   * APPROVAL_DENIED, APPROVAL_TIMEOUT, ... 0 or unset: an ask is answered
   * at once. The call's timeout is timeoutMs plus waitMs. Not a field of
   * the call: no rule reads it.
   */
  waitMs?: number;
  /**
   * The ApprovalRequest an earlier ask named (result.approval.name): this
   * same call is decided against it, allowed once if approved, asked
   * again while pending.
   */
  approval?: string;
}

export interface ResourceRef {
  type: string;
  name: string;
}

export interface EvaluationResult {
  decision: Decision;
  /** For a rule deny, the rule's description; else why. */
  reason: string | null;
  /**
   * For a rule deny, the matched rule's id; the sidecar's own codes
   * (NO_POLICIES, AGENT_FROZEN, OVERLOADED, USAGE_UNAVAILABLE, ...: every one
   * in docs/policies.md, "The result") unchanged; SIDECAR_UNAVAILABLE when
   * the sidecar gave no decision; null otherwise.
   */
  code: string | null;
  matchedPolicyId: string | null;
  matchedPolicyVersion: number | null;
  matchedRuleId: string | null;
  /** The sidecar's evaluation time (0 when it gave no decision). */
  latencyMs: number;
  effect: Effect;
  warnings: string[];
  bundleRevision: string | null;
  decisionId: string | null;
  /** The resource whose evaluation decided, for a tiered policy. */
  matchedResource: ResourceRef | null;
  /**
   * "ClusterPolicy" or "Policy": the level that decided, in a namespace
   * that ClusterPolicies select (docs/guardrails.md); null otherwise.
   */
  matchedPolicyKind: string | null;
  /** The PolicyException that changed this decision (docs/exceptions.md). */
  exceptionApplied: string | null;
  /** What each Audit (shadow mode) policy would have decided; never the decision. */
  shadow: ShadowVerdict[];
  /** The ApprovalRequest of an asked call: on an ask, and on the allow or deny it settled into. */
  approval: Approval | null;
  /** A result's decision (evaluateResult): the spans of output.text a redact decision replaced. */
  redactions: Redaction[];
  /**
   * A redact decision's output as it must be delivered: its text with
   * every redacted span replaced by [REDACTED:<rule-id>]. null otherwise.
   */
  output: Output | null;
  /** A result's decision: per result rule that ran, whether it held and why. */
  explanations: Explanation[];
}

/** EvaluateOptions for a result: the call as it was decided, and whether the tool failed. */
export interface EvaluateResultOptions extends Omit<EvaluateOptions, "waitMs" | "approval"> {
  /** The tool failed (its output is an error message); output.isError. */
  isError?: boolean;
}

/** One Audit policy's verdict, recorded beside the decision. */
export interface ShadowVerdict {
  /** "ClusterPolicy", or absent for a Policy. */
  kind?: string;
  policy: string;
  decision: Decision;
  /** The rule that decided, absent when the policy's default did. */
  rule?: string;
}

/** Where fail-open warnings go. */
export interface Logger {
  warn(message: string): void;
}

export interface ClientOptions {
  /**
   * http://host:port[/prefix], https://..., unix:///abs/path.sock or
   * unix:/abs/path.sock. Unset: TOOLGATE_URL, else the sidecar's socket
   * (/var/run/toolgate/toolgate.sock) when it exists, else
   * http://127.0.0.1:8181.
   */
  url?: string;
  /** Bounds each evaluate(); default 500. */
  timeoutMs?: number;
  /**
   * Allow, instead of deny, when the sidecar gives no decision; each such
   * allow is logged and counted in failOpenCount. Off by default: an
   * unreachable guard must not wave every call through.
   */
  failOpen?: boolean;
  /** Where fail-open allows are reported; default console. */
  logger?: Logger;
  /**
   * Most connections to the sidecar, so most calls in flight at once; more
   * wait for a free connection. Default 16: under the sidecar's
   * --max-evaluations (32), past which it denies OVERLOADED.
   */
  maxSockets?: number;
}

interface Endpoint {
  /** http: or https: */
  protocol: "http:" | "https:";
  host: string;
  port: number | undefined;
  /** The path of /v1/evaluate, with any prefix. */
  path: string;
  socketPath: string | undefined;
  /** The endpoint as a URL, for reasons. */
  where: string;
}

/**
 * Finds the sidecar as every toolgate client does: the explicit URL, else
 * TOOLGATE_URL, else the socket when it exists, else http://127.0.0.1:8181.
 * Throws TypeError, naming the setting, on a URL it cannot use.
 */
export function discover(explicit?: string): Endpoint {
  if (explicit !== undefined && explicit !== null && explicit !== "") {
    return parseURL("ClientOptions.url", explicit);
  }
  const env = process.env[ENV_URL];
  if (env) return parseURL(ENV_URL, env);
  if (existsSync(DEFAULT_SOCKET)) return unixEndpoint("default socket", DEFAULT_SOCKET, DEFAULT_SOCKET);
  return parseURL("default", DEFAULT_URL);
}

function parseURL(from: string, raw: string): Endpoint {
  if (typeof raw !== "string") {
    throw new TypeError(`toolgate: ${from} must be a string, got ${typeof raw}`);
  }
  if (raw.startsWith("unix://")) return unixEndpoint(from, raw, raw.slice("unix://".length));
  if (raw.startsWith("unix:")) return unixEndpoint(from, raw, raw.slice("unix:".length));
  let u: URL;
  try {
    u = new URL(raw);
  } catch {
    throw new TypeError(`toolgate: ${from} ${JSON.stringify(raw)} is not a URL: want unix:///path/to.sock or http://host:port`);
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") {
    throw new TypeError(`toolgate: ${from} ${JSON.stringify(raw)}: want unix:///path/to.sock or http://host:port`);
  }
  if (u.hostname === "") {
    throw new TypeError(`toolgate: ${from} ${JSON.stringify(raw)} has no host: want http://host:port`);
  }
  if (u.search !== "" || u.hash !== "" || u.username !== "" || u.password !== "" || raw.includes("?") || raw.includes("#")) {
    throw new TypeError(`toolgate: ${from} ${JSON.stringify(raw)}: a sidecar URL has no user, query or fragment`);
  }
  const prefix = u.pathname.replace(/\/+$/, "");
  const host = u.hostname.startsWith("[") ? u.hostname.slice(1, -1) : u.hostname;
  return {
    protocol: u.protocol,
    host,
    port: u.port === "" ? undefined : Number(u.port),
    path: prefix + "/v1/evaluate",
    socketPath: undefined,
    where: `${u.protocol}//${u.host}${prefix}`,
  };
}

function unixEndpoint(from: string, raw: string, path: string): Endpoint {
  if (!path.startsWith("/")) {
    throw new TypeError(`toolgate: ${from} ${JSON.stringify(raw)}: a socket path must be absolute, as in unix:///var/run/toolgate/toolgate.sock`);
  }
  // The host name is ignored on a socket; it only makes a valid request.
  return { protocol: "http:", host: "sidecar", port: undefined, path: "/v1/evaluate", socketPath: path, where: "unix://" + path };
}

/** What a guard reports when the tool may not run (denied, or asked and not approved). */
export function denialMessage(toolName: string, r: EvaluationResult): string {
  let why = r.reason ?? "";
  if (r.matchedRuleId) {
    why = `rule ${r.matchedRuleId}` + (r.matchedPolicyId ? ` (policy ${r.matchedPolicyId})` : "") + (why ? `: ${why}` : "");
  } else if (r.code) {
    why = why ? `${r.code}: ${why}` : r.code;
  }
  if (r.decision === "ask") {
    const ar = r.approval ? ` (ApprovalRequest ${r.approval.namespace}/${r.approval.name})` : "";
    return `toolgate asks a person about ${toolName}` + (why ? `: ${why}` : "") + ar;
  }
  return `toolgate denied ${toolName}` + (why ? `: ${why}` : "");
}

/** The error the adapters throw where a framework takes a thrown error as the tool's failure. */
export class ToolDeniedError extends Error {
  readonly result: EvaluationResult;
  readonly toolName: string;
  constructor(toolName: string, result: EvaluationResult) {
    super(denialMessage(toolName, result));
    this.name = "ToolDeniedError";
    this.toolName = toolName;
    this.result = result;
  }
}

/**
 * Asks a toolgate sidecar for decisions over kept-alive connections. Safe to
 * share: make one per process.
 */
export class Client {
  /** The sidecar this client asks, as unix:///path or http://host:port. */
  readonly url: string;
  readonly timeoutMs: number;
  readonly failOpen: boolean;
  private _failOpenCount = 0;
  private readonly endpoint: Endpoint;
  private readonly pool: Pool;
  private readonly logger: Logger;

  constructor(options: ClientOptions = {}) {
    if (options === null || typeof options !== "object") {
      throw new TypeError("toolgate: new Client(options): options must be an object");
    }
    this.endpoint = discover(options.url);
    const timeoutMs = options.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    if (typeof timeoutMs !== "number" || !(timeoutMs > 0) || !Number.isFinite(timeoutMs)) {
      throw new TypeError(`toolgate: ClientOptions.timeoutMs ${String(timeoutMs)} must be a positive number`);
    }
    this.timeoutMs = timeoutMs;
    this.failOpen = options.failOpen === true;
    this.logger = options.logger ?? console;
    this.url = this.endpoint.where;
    const maxSockets = options.maxSockets ?? DEFAULT_MAX_SOCKETS;
    if (!Number.isInteger(maxSockets) || maxSockets < 1) {
      throw new TypeError(`toolgate: ClientOptions.maxSockets ${String(maxSockets)} must be a positive integer`);
    }
    // Kept-alive connections across calls: a new TCP or Unix connection per
    // decision would cost more than the decision. Idle ones are closed after
    // 50 s, before the sidecar's 60 s idle timeout, and never keep the
    // process alive.
    const e = this.endpoint;
    this.pool = new Pool({ host: e.host, port: e.port, socketPath: e.socketPath, tls: e.protocol === "https:", path: e.path }, maxSockets, MAX_ANSWER);
  }

  /** How many calls were allowed because failOpen was set and the sidecar gave no decision. */
  get failOpenCount(): number {
    return this._failOpenCount;
  }

  /** Drops the kept-alive connections. The client still works after it. */
  close(): void {
    this.pool.destroy();
  }

  /**
   * Asks the sidecar whether toolName may run. Resolves to a decision; never
   * rejects because of the sidecar (unreachable, slow, non-200, not a
   * decision: a deny with code SIDECAR_UNAVAILABLE, or an allow with failOpen).
   * Rejects with TypeError only for a caller's mistake: an empty toolName, a
   * negative or non-number waitMs, an empty approval, or a request that does
   * not encode as JSON.
   *
   * A call an ask rule decides resolves to decision "ask" (not an allow;
   * result.approval names the ApprovalRequest) at once, unless
   * options.waitMs holds it for a person's decision; the call is bounded by
   * timeoutMs plus waitMs.
   */
  evaluate(toolName: string, options: EvaluateOptions = {}): Promise<EvaluationResult> {
    if (typeof toolName !== "string" || toolName === "") {
      return Promise.reject(new TypeError("toolgate: evaluate(toolName): toolName must be a non-empty string"));
    }
    let body: string;
    let traceparent: string | undefined;
    let waitMs: number;
    try {
      waitMs = checkWait(options?.waitMs, "EvaluateOptions.waitMs");
      body = encodeRequest(toolName, options ?? {}, waitMs);
      traceparent = traceparentOf(options?.traceparent);
    } catch (err) {
      return Promise.reject(err instanceof TypeError ? err : new TypeError(`toolgate: encoding the request: ${(err as Error).message}`));
    }
    return this.post(body, traceparent, this.timeoutMs + waitMs).catch((why: unknown) => this.noDecision(String(why instanceof Error ? why.message : why)));
  }

  /**
   * Asks the sidecar to judge what toolName returned, after it ran: output
   * is the tool's return value (buildOutput: a string is the text; an
   * object or array is output.structured, and its JSON the text), options
   * the call as evaluate() sent it. Only result rules run.
   *
   * Hand the output on only on "allow": a deny withholds it (reason says
   * why). When isRedacted(result), deliver result.output.text (every
   * redacted span replaced by [REDACTED:<rule-id>]), never the original.
   * Fails closed as evaluate() does (an output past the sidecar's request
   * limit, 1 MiB, is refused: a deny). Rejects with TypeError only for a
   * caller's mistake: an empty toolName, waitMs or approval (a result is
   * judged after the tool ran: there is nothing to hold), an output that
   * does not encode as JSON.
   */
  evaluateResult(toolName: string, output: unknown, options: EvaluateResultOptions = {}): Promise<EvaluationResult> {
    let built: Output;
    try {
      built = buildOutput(output, options?.isError ?? false);
    } catch (err) {
      return Promise.reject(err);
    }
    return this.evaluateOutput(toolName, built, options);
  }

  /**
   * evaluateResult with the output already built (buildOutput, mcpOutput):
   * its fields are sent as they are.
   */
  evaluateOutput(toolName: string, output: Output, options: EvaluateResultOptions = {}): Promise<EvaluationResult> {
    if (typeof toolName !== "string" || toolName === "") {
      return Promise.reject(new TypeError("toolgate: evaluateResult(toolName): toolName must be a non-empty string"));
    }
    const o = (options ?? {}) as EvaluateOptions;
    if (o.waitMs !== undefined || o.approval !== undefined) {
      return Promise.reject(new TypeError("toolgate: evaluateResult: waitMs and approval are for a call's approval; a result is judged after the tool ran"));
    }
    if (output === null || typeof output !== "object" || Array.isArray(output)) {
      return Promise.reject(new TypeError("toolgate: evaluateOutput: output must be an object {text, structured, isError, size}"));
    }
    let body: string;
    let traceparent: string | undefined;
    try {
      body = encodeRequest(toolName, o, 0, output);
      traceparent = traceparentOf(o.traceparent);
    } catch (err) {
      return Promise.reject(err instanceof TypeError ? err : new TypeError(`toolgate: encoding the request: ${(err as Error).message}`));
    }
    return this.post(body, traceparent, this.timeoutMs).catch((why: unknown) => this.noDecision(String(why instanceof Error ? why.message : why)));
  }

  private noDecision(why: string): EvaluationResult {
    if (this.failOpen) {
      this._failOpenCount++;
      const reason = `toolgate sidecar at ${this.url} gave no decision, allowed (fail open): ${why}`;
      try {
        this.logger.warn(reason);
      } catch {
        // A broken logger must not turn an allow into a crash.
      }
      return unavailable("allow", reason);
    }
    return unavailable("deny", `toolgate sidecar at ${this.url} gave no decision, denied (fail closed): ${why}`);
  }

  /** One request, answered within budgetMs (the timeout, plus any wait for a person); rejects with why there is no decision. */
  private post(body: string, traceparent: string | undefined, budgetMs: number): Promise<EvaluationResult> {
    return new Promise<EvaluationResult>((resolve, reject) => {
      let settled = false;
      let abandon: (() => void) | undefined;
      const timer = setTimeout(() => {
        if (settled) return;
        settled = true;
        abandon?.();
        reject(new Error(`no answer within ${budgetMs}ms`));
      }, budgetMs);
      abandon = this.pool.post(body, traceparent, (err, answer) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        if (err) {
          reject(new Error(err.message || String((err as NodeJS.ErrnoException).code)));
          return;
        }
        try {
          resolve(readAnswer(answer!.status, answer!.body));
        } catch (e) {
          reject(e);
        }
      });
    });
  }
}

/** The decision in an answer, or throws why there is none. */
function readAnswer(status: number, data: string): EvaluationResult {
  if (status !== 200) {
    let msg = `status ${status}`;
    try {
      const e = JSON.parse(data) as { error?: unknown };
      if (e && typeof e.error === "string" && e.error !== "") msg += `: ${e.error}`;
    } catch {
      // not JSON: the status says enough
    }
    throw new Error(msg);
  }
  let parsed: unknown;
  try {
    parsed = JSON.parse(data);
  } catch (e) {
    throw new Error(`the answer is not a decision: ${(e as Error).message}`);
  }
  return readDecision(parsed);
}

function traceparentOf(t: EvaluateOptions["traceparent"]): string | undefined {
  if (t === undefined || t === null || t === "") return undefined;
  if (typeof t === "string") return t;
  if (typeof t === "object" && typeof t.traceparent === "string" && t.traceparent !== "") return t.traceparent;
  if (typeof t === "object" && (t.traceparent === undefined || t.traceparent === "")) return undefined;
  throw new TypeError("toolgate: EvaluateOptions.traceparent must be a string or an object with a traceparent string");
}

/** waitMs as a number of milliseconds (0: do not wait), or throws TypeError. */
function checkWait(waitMs: unknown, what: string): number {
  if (waitMs === undefined || waitMs === null) return 0;
  if (typeof waitMs !== "number" || !(waitMs >= 0) || !Number.isFinite(waitMs)) {
    throw new TypeError(`toolgate: ${what} ${String(waitMs)}: want how many milliseconds to wait for a person's approval (finite, at least 0; 0 does not wait)`);
  }
  return waitMs;
}

/** The request body the sidecar reads; waitMs is checked (checkWait); output makes it a result's. */
function encodeRequest(toolName: string, o: EvaluateOptions, waitMs: number, output?: Output): string {
  const m: Record<string, unknown> = {};
  if (o.extra) {
    if (typeof o.extra !== "object") throw new TypeError("toolgate: EvaluateOptions.extra must be an object");
    Object.assign(m, o.extra);
  }
  m["tool_name"] = toolName;
  setString(m, "session_id", o.sessionId);
  setString(m, "agent_id", o.agentId);
  setString(m, "framework", o.framework);
  const md = o.metadata;
  if (md) {
    setString(m, "tool_use_id", md.toolUseId);
    if (md.input !== undefined && md.input !== null) m["input"] = md.input;
    if (md.args !== undefined && md.args !== null) m["args"] = md.args;
    if (md.kwargs !== undefined && md.kwargs !== null) m["kwargs"] = md.kwargs;
  }
  // Not fields of the call: the sidecar takes them out before deciding.
  // The wait is a Go duration, to the millisecond.
  const ms = Math.round(waitMs);
  if (ms > 0) m["wait"] = `${ms}ms`;
  if (o.approval !== undefined && o.approval !== null) {
    if (typeof o.approval !== "string" || o.approval === "") {
      throw new TypeError(`toolgate: EvaluateOptions.approval must name an ApprovalRequest (a non-empty string), not ${JSON.stringify(o.approval)}`);
    }
    m["approval"] = o.approval;
  }
  if (output !== undefined) m["output"] = output;
  return JSON.stringify(m);
}

function setString(m: Record<string, unknown>, k: string, v: string | undefined): void {
  if (v !== undefined && v !== null && v !== "") m[k] = v;
}

const EFFECTS = new Set(["allow", "deny", "ask", "warn", "audit", "redact"]);

/** Reads the sidecar's answer, or throws when it is not a decision. */
function readDecision(x: unknown): EvaluationResult {
  if (x === null || typeof x !== "object" || Array.isArray(x)) {
    throw new Error("the answer is not a decision: not a JSON object");
  }
  const a = x as Record<string, unknown>;
  const decision = a["decision"];
  // A decision this client does not know is never read as one.
  if (decision !== "allow" && decision !== "deny" && decision !== "ask") {
    throw new Error(`the answer's decision is ${JSON.stringify(decision) ?? "missing"}, not allow, deny or ask`);
  }
  const approval = readApproval(a["approval"]);
  const str = (k: string): string | null => (typeof a[k] === "string" && a[k] !== "" ? (a[k] as string) : null);
  const effect = typeof a["effect"] === "string" && EFFECTS.has(a["effect"]) ? (a["effect"] as Effect) : decision;
  const matchedRuleId = str("matchedRuleId");
  let code = str("code");
  // A rule deny's code is the rule's id, its reason
  // the rule's description. The sidecar's own codes pass through.
  if (decision === "deny" && code === null && matchedRuleId !== null) code = matchedRuleId;
  const version = a["matchedPolicyVersion"];
  const mr = a["matchedResource"] as ResourceRef | undefined;
  return {
    decision,
    reason: str("reason"),
    code,
    matchedPolicyId: str("matchedPolicyId"),
    matchedPolicyVersion: typeof version === "number" ? version : null,
    matchedRuleId,
    latencyMs: typeof a["latencyMs"] === "number" ? (a["latencyMs"] as number) : 0,
    effect,
    warnings: Array.isArray(a["warnings"]) ? (a["warnings"] as unknown[]).filter((w): w is string => typeof w === "string") : [],
    bundleRevision: str("bundleRevision"),
    decisionId: str("decisionId"),
    matchedResource: mr && typeof mr === "object" && typeof mr.type === "string" ? { type: mr.type, name: String(mr.name ?? "") } : null,
    matchedPolicyKind: str("matchedPolicyKind"),
    exceptionApplied: str("exceptionApplied"),
    shadow: Array.isArray(a["shadow"])
      ? (a["shadow"] as unknown[]).filter((v): v is ShadowVerdict => v !== null && typeof v === "object" && typeof (v as ShadowVerdict).policy === "string")
      : [],
    approval,
    ...readResultPhase(a),
  };
}

/** A result decision's redactions, output and explanations; throws when malformed. */
function readResultPhase(a: Record<string, unknown>): Pick<EvaluationResult, "redactions" | "output" | "explanations"> {
  const objects = (k: string): Record<string, unknown>[] => {
    const v = a[k];
    if (v === undefined || v === null) return [];
    if (!Array.isArray(v) || !v.every((x) => x !== null && typeof x === "object" && !Array.isArray(x))) {
      throw new Error(`the answer is not a decision: its ${k} is not a list of objects`);
    }
    return v as Record<string, unknown>[];
  };
  const out = a["output"];
  if (out !== undefined && out !== null && (typeof out !== "object" || Array.isArray(out))) {
    throw new Error("the answer is not a decision: its output is not an object");
  }
  return {
    redactions: objects("redactions") as unknown as Redaction[],
    output: (out ?? null) as Output | null,
    explanations: objects("explanations") as unknown as Explanation[],
  };
}

/** The answer's approval: null when absent; throws when malformed. */
function readApproval(x: unknown): Approval | null {
  if (x === undefined || x === null) return null;
  const a = x as Record<string, unknown>;
  if (typeof x !== "object" || Array.isArray(x) || typeof a["name"] !== "string" || a["name"] === "" ||
      typeof a["namespace"] !== "string" || typeof a["expiresAt"] !== "string") {
    throw new Error("the answer is not a decision: its approval is not {name, namespace, expiresAt}");
  }
  return { name: a["name"], namespace: a["namespace"], expiresAt: a["expiresAt"] };
}

function unavailable(decision: Decision, reason: string): EvaluationResult {
  return {
    decision,
    reason,
    code: SIDECAR_UNAVAILABLE,
    matchedPolicyId: null,
    matchedPolicyVersion: null,
    matchedRuleId: null,
    latencyMs: 0,
    effect: decision,
    warnings: [],
    bundleRevision: null,
    decisionId: null,
    matchedResource: null,
    matchedPolicyKind: null,
    exceptionApplied: null,
    shadow: [],
    approval: null,
    redactions: [],
    output: null,
    explanations: [],
  };
}

/** Options every framework guard takes. */
export interface GuardOptions {
  /** The session each call belongs to: a string, or read per call. */
  sessionId?: string | (() => string | undefined);
  agentId?: string;
  /** Overrides the adapter's framework tag. */
  framework?: string;
  /** Extra request fields policies read (roles, side_effect, ...). */
  extra?: Record<string, unknown>;
  /** The current W3C traceparent, read per call. */
  traceparent?: () => string | undefined;
  /**
   * How long a call an ask rule decides waits for a person's approval
   * before it is refused; default GUARD_WAIT_MS (an hour: the sidecar caps
   * it at the rule's approval timeout); 0 does not wait.
   */
  waitMs?: number;
  /**
   * Judge what the tool returned with the result rules (evaluateResult)
   * before the framework gets it: withheld, it is replaced by the reason
   * as the framework's tool error; redacted, the redacted output is
   * handed on. Default true; false skips it.
   */
  judgeResult?: boolean;
}

/**
 * @internal Decides a guarded call: within the client's timeout first, and
 * only when the answer is an ask, the same call again with its approval and
 * opts.waitMs, held by the sidecar until a person decides. Calls that are
 * not asked keep the short timeout, so a hung sidecar still fails closed
 * fast. Rejects with TypeError for a bad waitMs, before anything is sent.
 */
export async function guardEvaluate(toolgate: Client, toolName: string, req: EvaluateOptions, opts: GuardOptions): Promise<EvaluationResult> {
  const waitMs = checkWait(opts.waitMs ?? GUARD_WAIT_MS, "GuardOptions.waitMs");
  const res = await toolgate.evaluate(toolName, req);
  if (res.decision !== "ask" || res.approval === null || waitMs === 0) return res;
  return toolgate.evaluate(toolName, { ...req, waitMs, approval: res.approval.name });
}

/** @internal the EvaluateOptions a guard sends. */
export function guardRequest(opts: GuardOptions, framework: string, metadata: EvaluationMetadata, sessionId?: string): EvaluateOptions {
  const s = typeof opts.sessionId === "function" ? opts.sessionId() : opts.sessionId;
  return {
    sessionId: s ?? sessionId,
    agentId: opts.agentId,
    framework: opts.framework ?? framework,
    metadata,
    extra: opts.extra,
    traceparent: opts.traceparent?.(),
  };
}

/**
 * The output object for what a tool returned, as the Claude Code hook and
 * the Go and Python clients build it: a string is the text; an object or
 * array (after a JSON round trip: toJSON, Dates) is structured, and its
 * compact JSON with keys sorted is the text, so text rules read it too; a
 * number or boolean is its JSON; null and undefined are no text. size is
 * the text's UTF-8 length. Throws TypeError for what JSON cannot carry (a
 * bigint, a function, a cycle).
 */
export function buildOutput(value: unknown, isError = false): Output {
  if (typeof isError !== "boolean") throw new TypeError("toolgate: evaluateResult: isError must be a boolean");
  let v = value;
  if (v !== null && v !== undefined && typeof v !== "string" && typeof v !== "number" && typeof v !== "boolean") {
    let doc: string | undefined;
    try {
      doc = JSON.stringify(v);
    } catch (err) {
      throw new TypeError(`toolgate: the tool's output does not encode as JSON: ${(err as Error).message}`);
    }
    if (doc === undefined) throw new TypeError(`toolgate: the tool's output does not encode as JSON: a ${typeof v}`);
    v = JSON.parse(doc);
  }
  if (typeof v === "number" && !Number.isFinite(v)) throw new TypeError(`toolgate: the tool's output does not encode as JSON: ${v}`);
  const out: Output = { isError };
  let text = "";
  if (typeof v === "string") text = v;
  else if (v !== null && v !== undefined) {
    if (typeof v === "object") out.structured = v;
    text = sortedJSON(v);
  }
  out.text = text;
  out.size = Buffer.byteLength(text, "utf8");
  return out;
}

/** JSON with object keys sorted, as the sidecar writes a decoded value (engine.Stringify). */
function sortedJSON(v: unknown): string {
  if (Array.isArray(v)) return "[" + v.map(sortedJSON).join(",") + "]";
  if (v !== null && typeof v === "object") {
    const o = v as Record<string, unknown>;
    return "{" + Object.keys(o).sort().map((k) => JSON.stringify(k) + ":" + sortedJSON(o[k])).join(",") + "}";
  }
  return JSON.stringify(v);
}

/** Whether a result decision let the output go on with spans redacted: deliver result.output.text. */
export function isRedacted(r: EvaluationResult): boolean {
  return r.decision === "allow" && r.effect === "redact";
}

/**
 * What a redact decision delivers in place of original: the redacted
 * text, read back as JSON when original was structured and the text still
 * is JSON, else the text. Never original, which holds what was redacted.
 */
export function redactedValue(original: unknown, text: string): unknown {
  if (typeof original === "string" || original === null || original === undefined) return text;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** What a guard reports when a result is withheld. */
export function withheldMessage(toolName: string, r: EvaluationResult): string {
  return denialMessage(toolName, r).replace(/^toolgate (denied|asks a person about) /, "toolgate withheld the result of ");
}

/** The error the adapters throw when a tool's result is withheld (ToolDeniedError with ofResult). */
export class ResultWithheldError extends ToolDeniedError {
  readonly ofResult = true;
  constructor(toolName: string, result: EvaluationResult) {
    super(toolName, result);
    this.name = "ResultWithheldError";
    this.message = withheldMessage(toolName, result);
  }
}

/**
 * @internal Judges what a guarded tool returned (GuardOptions.judgeResult):
 * the value to hand on (the original, or the redacted output), or the
 * withholding decision. A redact decision with no text to deliver is
 * withheld: fail closed.
 */
export async function guardJudge(
  toolgate: Client,
  toolName: string,
  req: EvaluateOptions,
  opts: GuardOptions,
  value: unknown,
  output?: Output,
): Promise<{ withheld: EvaluationResult } | { value: unknown; redacted: boolean }> {
  if (opts.judgeResult === false) return { value, redacted: false };
  const { waitMs: _w, approval: _a, ...call } = req;
  const res = output ? await toolgate.evaluateOutput(toolName, output, call) : await toolgate.evaluateResult(toolName, value, call);
  if (res.decision !== "allow") return { withheld: res };
  if (!isRedacted(res)) return { value, redacted: false };
  const text = res.output?.text;
  if (typeof text !== "string") {
    return { withheld: { ...res, decision: "deny", effect: "deny", reason: "the sidecar redacted the result but sent no output to deliver; withheld (fail closed)" } };
  }
  return { value: output ? text : redactedValue(value, text), redacted: true };
}
