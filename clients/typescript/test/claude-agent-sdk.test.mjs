// @toolgate/client/claude-agent-sdk: canUseTool and the PreToolUse hook,
// called with the input shapes the SDK documents (a query needs a model
// service, so the SDK's own loop is not run).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { Client } from "../dist/index.js";
import { toolgateCanUseTool, toolgatePreToolUseHook } from "../dist/claude-agent-sdk.js";
import { startSidecar, samplesBundle, shortTempDir, decisionLine } from "./helpers.mjs";

let sc;
before(async () => {
  sc = await startSidecar({ bundleFile: samplesBundle(shortTempDir()) });
});
after(async () => {
  await sc?.kill();
});

/** A PreToolUseHookInput as the SDK sends it. */
function preToolUse(tool_name, tool_input, extra = {}) {
  return {
    hook_event_name: "PreToolUse",
    session_id: "sess-claude",
    transcript_path: "/tmp/transcript.jsonl",
    cwd: "/workspace",
    permission_mode: "default",
    tool_name,
    tool_input,
    tool_use_id: "toolu_01ABC",
    ...extra,
  };
}

test("canUseTool: allow with the input unchanged, deny with the reason", async () => {
  const toolgate = new Client({ url: sc.unixURL, timeoutMs: 5000 });
  try {
    const canUseTool = toolgateCanUseTool(toolgate, { agentId: "coder-1", sessionId: "s-claude" });
    const signal = new AbortController().signal;
    const input = { command: "ls -la src/" };
    const allow = await canUseTool("Bash", input, { signal, suggestions: [], toolUseID: "toolu_1", requestId: "r1" });
    assert.deepEqual(allow, { behavior: "allow", updatedInput: input });
    const deny = await canUseTool("Bash", { command: "rm -rf /" }, { signal, toolUseID: "toolu_2", requestId: "r2" });
    assert.equal(deny.behavior, "deny");
    assert.match(deny.message, /^toolgate denied Bash: rule no-rm-rf \(policy bash-no-rm-rf\): rm -rf is blocked/);
    const frozen = await toolgateCanUseTool(toolgate, { agentId: "Billing-Bot-7" })("Read", { file_path: "/workspace/README.md" }, { signal, toolUseID: "t3", requestId: "r3" });
    assert.equal(frozen.behavior, "deny");
    assert.match(frozen.message, /AGENT_FROZEN/);
    const line = await decisionLine(sc, (d) => d.session_id === "s-claude" && d.decision === "deny");
    assert.equal(line.framework, "claude-agent-sdk");
  } finally {
    toolgate.close();
  }
});

test("PreToolUse hook: permissionDecision allow/deny with the reason; the event's session", async () => {
  const toolgate = new Client({ url: sc.tcpURL, timeoutMs: 5000 });
  try {
    const hook = toolgatePreToolUseHook(toolgate, { agentId: "coder-1" });
    const signal = new AbortController().signal;
    const allow = await hook(preToolUse("Read", { file_path: "/workspace/README.md" }), "toolu_01ABC", { signal });
    assert.equal(allow.hookSpecificOutput.hookEventName, "PreToolUse");
    assert.equal(allow.hookSpecificOutput.permissionDecision, "allow");

    const deny = await hook(preToolUse("Bash", { command: "rm -rf /" }), "toolu_01ABC", { signal });
    assert.equal(deny.hookSpecificOutput.permissionDecision, "deny");
    assert.match(deny.hookSpecificOutput.permissionDecisionReason, /^toolgate denied Bash: rule no-rm-rf/);

    // An MCP tool as Claude names it.
    const mcp = await toolgatePreToolUseHook(toolgate, { agentId: "triage-bot" })(
      preToolUse("mcp__github__create_issue", { owner: "acme", repo: "api", title: "x" }),
      "toolu_02",
      { signal },
    );
    assert.equal(mcp.hookSpecificOutput.permissionDecision, "deny");
    assert.match(mcp.hookSpecificOutput.permissionDecisionReason, /no-github-writes/);

    // Other events pass through without a decision.
    assert.deepEqual(await hook({ hook_event_name: "PostToolUse", session_id: "x", transcript_path: "", cwd: "", tool_name: "Bash", tool_input: {}, tool_response: {}, tool_use_id: "t" }, "t", { signal }), {});

    const line = await decisionLine(sc, (d) => d.session_id === "sess-claude" && d.tool_name === "Bash");
    assert.equal(line.framework, "claude-agent-sdk");
    assert.equal(line.decision, "deny");
  } finally {
    toolgate.close();
  }
});

test("fail closed: no sidecar is a deny from both", async () => {
  const toolgate = new Client({ url: "unix:///nonexistent/toolgate.sock" });
  try {
    const signal = new AbortController().signal;
    const r = await toolgateCanUseTool(toolgate)("Read", { file_path: "/x" }, { signal, toolUseID: "t", requestId: "r" });
    assert.equal(r.behavior, "deny");
    assert.match(r.message, /SIDECAR_UNAVAILABLE/);
    const h = await toolgatePreToolUseHook(toolgate)(preToolUse("Read", { file_path: "/x" }), "t", { signal });
    assert.equal(h.hookSpecificOutput.permissionDecision, "deny");
  } finally {
    toolgate.close();
  }
});
