package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/exitcode"
	"github.com/toolgate/toolgate/internal/testenv"
)

// hookCase is one recorded Claude Code PreToolUse event and what the
// sample policies decide for it.
type hookCase struct {
	file     string
	decision string
	// reason must appear in permissionDecisionReason: the rule id and its
	// reason, for the model to read.
	reason string
}

var sampleHookCases = []hookCase{
	{"bash_ls.json", "allow", "toolgate allowed Bash: rule read-only-shell (policy default-deny-readonly)"},
	{"bash_rm_rf.json", "deny", "toolgate denied Bash: rule no-rm-rf (policy bash-no-rm-rf): rm -rf is blocked; delete specific files, or ask a human"},
	{"write.json", "deny", `toolgate denied Write: no rule matched and policy "default-deny-readonly" denies by default`},
	{"edit.json", "deny", `toolgate denied Edit: no rule matched and policy "default-deny-readonly" denies by default`},
	{"mcp_github_list_issues.json", "allow", "toolgate allowed mcp__github__list_issues: rule github-reads (policy mcp-github-writes)"},
	{"mcp_github_create_issue.json", "deny", "toolgate denied mcp__github__create_issue: rule no-github-writes (policy mcp-github-writes): agents may not create, update or delete anything on GitHub"},
}

func hookEvent(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "hook", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// hookDecisionOf checks o is the documented PreToolUse answer, exit 0 and
// exactly hookSpecificOutput{hookEventName, permissionDecision,
// permissionDecisionReason} on one line, and returns it.
func hookDecisionOf(t *testing.T, o outcome) hookDecision {
	t.Helper()
	if o.code != 0 {
		t.Fatalf("exit %d (a decision exits 0 so Claude Code reads stdout), stderr:\n%s", o.code, o.stderr)
	}
	if strings.Count(o.stdout, "\n") != 1 || !strings.HasSuffix(o.stdout, "}\n") {
		t.Fatalf("stdout is not one JSON line: %q", o.stdout)
	}
	var top map[string]map[string]string
	if err := json.Unmarshal([]byte(o.stdout), &top); err != nil {
		t.Fatalf("stdout: %v\n%s", err, o.stdout)
	}
	inner, ok := top["hookSpecificOutput"]
	if len(top) != 1 || !ok || len(inner) != 3 || inner["hookEventName"] != "PreToolUse" {
		t.Fatalf("stdout is not a PreToolUse hookSpecificOutput: %s", o.stdout)
	}
	d := hookDecision{HookEventName: inner["hookEventName"], PermissionDecision: inner["permissionDecision"],
		PermissionDecisionReason: inner["permissionDecisionReason"]}
	if d.PermissionDecision != "allow" && d.PermissionDecision != "deny" && d.PermissionDecision != "ask" {
		t.Fatalf("permissionDecision %q", d.PermissionDecision)
	}
	return d
}

func checkHookCase(t *testing.T, c hookCase, o outcome) {
	t.Helper()
	d := hookDecisionOf(t, o)
	if d.PermissionDecision != c.decision || !strings.Contains(d.PermissionDecisionReason, c.reason) {
		t.Errorf("%s: %s %q, want %s %q", c.file, d.PermissionDecision, d.PermissionDecisionReason, c.decision, c.reason)
	}
}

func TestHookBundleDir(t *testing.T) {
	for _, c := range sampleHookCases {
		t.Run(c.file, func(t *testing.T) {
			checkHookCase(t, c, run(t, hookEvent(t, c.file), "hook", "claude-code", "--bundle-dir", samplesDir))
		})
	}
	// The sample freeze names billing-bot-7: --agent-id reaches the engine.
	frozen := run(t, hookEvent(t, "bash_ls.json"), "hook", "claude-code", "--bundle-dir", samplesDir, "--agent-id", "billing-bot-7")
	if d := hookDecisionOf(t, frozen); d.PermissionDecision != "deny" || !strings.Contains(d.PermissionDecisionReason, "AGENT_FROZEN") ||
		!strings.Contains(d.PermissionDecisionReason, "INC-1042") {
		t.Errorf("frozen agent: %+v", d)
	}
}

// fieldsPolicy allows Glob only when every field the hook sets arrived as
// the event carried it.
const fieldsPolicy = `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: hook-fields}
spec:
  defaultEffect: deny
  rules:
  - id: all-fields
    description: the hook passed every field
    effect: allow
    conditions:
    - {field: tool_name, operator: eq, value: Glob}
    - {field: framework, operator: eq, value: claude-code}
    - {field: session_id, operator: eq, value: s-9}
    - {field: tool_use_id, operator: eq, value: toolu_9}
    - {field: agent_id, operator: eq, value: dev-1}
    - {field: input.pattern, operator: eq, value: "**/*.go"}
`

const globEvent = `{"session_id":"s-9","hook_event_name":"PreToolUse","tool_name":"Glob","tool_input":{"pattern":"**/*.go"},"tool_use_id":"toolu_9"}`

func TestHookRequestFields(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"p.yaml": fieldsPolicy})
	if d := hookDecisionOf(t, run(t, globEvent, "hook", "claude-code", "--bundle-dir", dir, "--agent-id", "dev-1")); d.PermissionDecision != "allow" {
		t.Errorf("with every field: %+v", d)
	}
	if d := hookDecisionOf(t, run(t, globEvent, "hook", "claude-code", "--bundle-dir", dir)); d.PermissionDecision != "deny" {
		t.Errorf("without --agent-id: %+v", d)
	}
}

// Events the hook cannot decide exit 2, the protocol's blocking error:
// nothing on stdout (Claude Code ignores it then) and the reason on stderr.
func TestHookMalformedEvent(t *testing.T) {
	for name, c := range map[string]struct{ stdin, stderr string }{
		"empty":        {"", "no hook event on stdin"},
		"not JSON":     {"rm -rf /", "is not a Claude Code PreToolUse or PostToolUse event: invalid character"},
		"array":        {`[{"tool_name":"Bash"}]`, "is not a Claude Code PreToolUse or PostToolUse event: json: cannot unmarshal array"},
		"tool_name":    {`{"tool_name":7}`, "is not a Claude Code PreToolUse or PostToolUse event: json: cannot unmarshal number"},
		"no tool_name": {`{"hook_event_name":"PreToolUse","tool_input":{}}`, "has no tool_name"},
		"other event":  {`{"hook_event_name":"Stop","tool_name":"Bash"}`, `hook_event_name "Stop": toolgate decides PreToolUse and PostToolUse events only`},
		"tool_input":   {`{"tool_name":"Bash","tool_input":"ls"}`, "tool_input of Bash must be a JSON object"},
		"two events":   {`{"tool_name":"Bash"} {"tool_name":"Bash"}`, "more than one JSON value"},
	} {
		t.Run(name, func(t *testing.T) {
			o := run(t, c.stdin, "hook", "claude-code", "--bundle-dir", samplesDir)
			if o.code != 2 || o.stdout != "" || !strings.HasPrefix(o.stderr, "toolgate hook claude-code: ") || !strings.Contains(o.stderr, c.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and %q", o.code, o.stdout, o.stderr, c.stderr)
			}
		})
	}
	for _, args := range [][]string{{"--timeout", "0s"}, {"--bundle-dir", "-"}, {"--bundle-dir", "testdata/hook/missing"}} {
		o := run(t, hookEvent(t, "bash_ls.json"), append([]string{"hook", "claude-code"}, args...)...)
		if o.code != 2 || o.stdout != "" || o.stderr == "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, o.code, o.stdout, o.stderr)
		}
	}
}

// toolgate hook needs the agent's protocol named: bare or unknown, it is a
// usage error listing the agents, never a silent help page an agent's hook
// would read as no decision.
func TestHookNamesItsAgents(t *testing.T) {
	for args, want := range map[string]string{
		"":       "toolgate hook: name an agent: toolgate hook claude-code",
		"cursor": `toolgate hook: unknown agent "cursor": use toolgate hook claude-code`,
	} {
		o := run(t, "", append([]string{"hook"}, strings.Fields(args)...)...)
		if o.code != exitcode.Usage || o.stdout != "" || !strings.Contains(o.stderr, want) {
			t.Errorf("toolgate hook %s: exit %d, stdout %q, stderr %q; want exit %d and %q", args, o.code, o.stdout, o.stderr, exitcode.Usage, want)
		}
	}
}

// TestHookRefusesFlagsThatCannotDecide: the checks the stdio guard shares
// (deciderFlags), as usage errors before any event is read.
func TestHookRefusesFlagsThatCannotDecide(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--timeout", "0s"}, "toolgate hook claude-code: --timeout must be positive, not 0s"},
		{[]string{"--timeout", "-1s"}, "--timeout must be positive, not -1s"},
		{[]string{"--bundle-dir", "-"}, "--bundle-dir -: stdin carries the agent's messages"},
		{[]string{"--bundle-dir", samplesDir, "--url", "http://127.0.0.1:1"}, "--bundle-dir decides locally, --url asks a sidecar: give one"},
		// The flag is named, not the client's Go field (Options.URL).
		{[]string{"--url", "ftp://x"}, `toolgate hook claude-code: --url "ftp://x": want unix:///path/to.sock or http://host:port`},
		{[]string{"--url", "unix://relative.sock"}, `--url "unix://relative.sock": a socket path must be absolute`},
		{[]string{"--url", "http://u:p@127.0.0.1:1"}, `--url "http://u:p@127.0.0.1:1": a sidecar URL has no user, query or fragment`},
		{[]string{"--wait", "-1s"}, "toolgate hook claude-code: --wait must not be negative, not -1s"},
		{[]string{"--wait", "1m", "--bundle-dir", samplesDir}, "--wait waits for an ApprovalRequest a sidecar makes on Kubernetes; --bundle-dir decides locally"},
	} {
		o := run(t, `{"hook_event_name":"PreToolUse","tool_name":"Read","tool_input":{}}`, append([]string{"hook", "claude-code"}, c.args...)...)
		if o.code != exitcode.Usage || o.stdout != "" || !strings.Contains(o.stderr, c.want) || strings.Contains(o.stderr, "Options.") {
			t.Errorf("hook %v: exit %d, stdout %q, stderr %q; want a usage error with %q", c.args, o.code, o.stdout, o.stderr, c.want)
		}
	}
}
