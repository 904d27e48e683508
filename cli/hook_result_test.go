package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/exitcode"
	"github.com/toolgate/toolgate/internal/testenv"
)

// PostToolUse events as Claude Code sends them (tool_response as its
// tools return it), judged with clients/testdata/results.yaml.
const (
	readKeyEvent = `{"session_id":"s-1","hook_event_name":"PostToolUse","tool_name":"Read","tool_input":{"file_path":"/home/dev/.aws/credentials"},` +
		`"tool_response":{"type":"text","file":{"filePath":"/home/dev/.aws/credentials","content":"aws_access_key_id = ` + awsKeyID + `\n"}},"tool_use_id":"toolu_2"}`
	mcpKeyEvent = `{"hook_event_name":"PostToolUse","tool_name":"mcp__files__read_file","tool_input":{"path":"/creds"},` +
		`"tool_response":"aws_access_key_id = ` + awsKeyID + `\nregion = eu-west-1"}`
	mcpConfidentialEvent  = `{"hook_event_name":"PostToolUse","tool_name":"mcp__docs__fetch","tool_input":{"id":7},"tool_response":[{"type":"text","text":"CONFIDENTIAL: the merger"}]}`
	bashConfidentialEvent = `{"hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"cat plan.md"},` +
		`"tool_response":{"stdout":"CONFIDENTIAL plan","stderr":"","interrupted":false}}`
	queryEvent      = `{"hook_event_name":"PostToolUse","tool_name":"mcp__db__query","tool_input":{"sql":"select *"},"tool_response":{"count":500,"rows":[]}}`
	plainEvent      = `{"hook_event_name":"PostToolUse","tool_name":"Read","tool_input":{"file_path":"README.md"},"tool_response":"# toolgate"}`
	noResponseEvent = `{"hook_event_name":"PostToolUse","tool_name":"Bash","tool_input":{"command":"true"}}`
)

// postToolUseOf checks o is a PostToolUse answer: exit 0 and one JSON
// object on one line, with no field Claude Code does not read.
func postToolUseOf(t *testing.T, o outcome) postToolUseOutput {
	t.Helper()
	if o.code != 0 {
		t.Fatalf("exit %d (an answer exits 0 so Claude Code reads stdout), stderr:\n%s", o.code, o.stderr)
	}
	if strings.Count(o.stdout, "\n") != 1 || !strings.HasSuffix(o.stdout, "}\n") {
		t.Fatalf("stdout is not one JSON line: %q", o.stdout)
	}
	dec := json.NewDecoder(strings.NewReader(o.stdout))
	dec.DisallowUnknownFields()
	var out postToolUseOutput
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("stdout is not a PostToolUse answer: %v\n%s", err, o.stdout)
	}
	if out.Decision != "" && out.Decision != "block" {
		t.Fatalf("decision %q: PostToolUse knows only block", out.Decision)
	}
	if h := out.HookSpecificOutput; h != nil && h.HookEventName != "PostToolUse" {
		t.Fatalf("hookSpecificOutput.hookEventName %q", h.HookEventName)
	}
	if strings.Contains(o.stdout, awsKeyID) {
		t.Errorf("the answer repeats the key it was to hide: %s", o.stdout)
	}
	return out
}

// checkPostToolUse runs every PostToolUse case through hook (local, or
// with a sidecar) and checks what Claude Code is told.
func checkPostToolUse(t *testing.T, hook func(stdin string) outcome) {
	t.Helper()
	// An MCP tool's redacted output replaces what it returned.
	out := postToolUseOf(t, hook(mcpKeyEvent))
	want := "aws_access_key_id = [REDACTED:aws-key]\nregion = eu-west-1"
	if out.Decision != "" || out.HookSpecificOutput == nil || out.HookSpecificOutput.UpdatedMCPToolOutput != want || out.HookSpecificOutput.UpdatedToolOutput != want ||
		!strings.Contains(out.HookSpecificOutput.AdditionalContext, "toolgate redacted 1 span(s) of the result of mcp__files__read_file: rule aws-key (policy results)") {
		t.Errorf("an MCP tool's key: %+v, want its output replaced by %q", out, want)
	}
	// A built-in tool's output is replaced by updatedToolOutput only
	// (Claude Code 2.1.121 and later): the redaction blocks too, saying why.
	out = postToolUseOf(t, hook(readKeyEvent))
	if out.Decision != "block" || !strings.Contains(out.Reason, "toolgate redacted 1 span(s) of the result of Read: rule aws-key") ||
		!strings.Contains(out.Reason, "do not use or repeat the redacted values") || out.HookSpecificOutput == nil ||
		out.HookSpecificOutput.UpdatedMCPToolOutput != nil || !strings.Contains(fmt.Sprint(out.HookSpecificOutput.UpdatedToolOutput), "[REDACTED:aws-key]") {
		t.Errorf("Read's key: %+v, want block saying why, and the output replaced by its redacted JSON", out)
	}
	// A withheld result blocks; an MCP tool's output is the reason.
	out = postToolUseOf(t, hook(mcpConfidentialEvent))
	wantReason := "toolgate withheld the result of mcp__docs__fetch: rule confidential (policy results): confidential documents stay in the company"
	if out.Decision != "block" || out.Reason != wantReason || out.HookSpecificOutput == nil || out.HookSpecificOutput.UpdatedMCPToolOutput != wantReason ||
		out.HookSpecificOutput.UpdatedToolOutput != wantReason {
		t.Errorf("a confidential MCP result: %+v, want block and the output replaced by %q", out, wantReason)
	}
	out = postToolUseOf(t, hook(bashConfidentialEvent))
	if out.Decision != "block" || !strings.Contains(out.Reason, "toolgate withheld the result of Bash: rule confidential") || out.HookSpecificOutput == nil ||
		out.HookSpecificOutput.UpdatedToolOutput != out.Reason || out.HookSpecificOutput.UpdatedMCPToolOutput != nil {
		t.Errorf("a confidential Bash result: %+v, want block", out)
	}
	// A structured result is judged on its fields.
	out = postToolUseOf(t, hook(queryEvent))
	if out.Decision != "block" || !strings.Contains(out.Reason, "rule too-many-rows (policy results): a query returns at most 100 rows") {
		t.Errorf("500 rows: %+v, want block by too-many-rows", out)
	}
	// Results no rule objects to go on: nothing to tell Claude Code.
	for _, ev := range []string{plainEvent, noResponseEvent} {
		if o := hook(ev); postToolUseOf(t, o) != (postToolUseOutput{}) || o.stdout != "{}\n" {
			t.Errorf("%s: stdout %q, want {}", ev, o.stdout)
		}
	}
}

func TestHookPostToolUseBundleDir(t *testing.T) {
	checkPostToolUse(t, func(stdin string) outcome {
		return run(t, stdin, "hook", "claude-code", "--bundle-dir", resultPolicies)
	})
}

// The real binary, as Claude Code spawns it, with a real sidecar process.
func TestHookPostToolUseSidecar(t *testing.T) {
	dir := t.TempDir()
	b := run(t, "", "bundle", "-f", resultPolicies)
	if b.code != 0 {
		t.Fatalf("bundle: exit %d: %s", b.code, b.stderr)
	}
	bundleFile := filepath.Join(dir, "bundle.json")
	if err := os.WriteFile(bundleFile, []byte(b.stdout), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := testenv.FreeLoopbackAddr(t)
	sock := filepath.Join(dir, "toolgate.sock")
	sc := exec.Command(toolgateBinary(t), "sidecar", "--bundle-file", bundleFile, "--decision-log", "none", "--listen", addr, "--listen", "unix://"+sock)
	logFile, err := os.Create(filepath.Join(dir, "sidecar.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logFile.Close() }()
	sc.Stdout, sc.Stderr = logFile, logFile
	if err := sc.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = sc.Wait(); close(exited) }()
	t.Cleanup(func() { _ = sc.Process.Kill(); <-exited })
	testenv.Eventually(t, "the sidecar is ready", func() (bool, string) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			return false, err.Error()
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	for _, url := range []string{"http://" + addr, "unix://" + sock} {
		t.Run(url[:4], func(t *testing.T) {
			checkPostToolUse(t, func(stdin string) outcome {
				return runBinary(t, stdin, []string{"TOOLGATE_URL=" + url}, "hook", "claude-code")
			})
		})
	}

	// A result the sidecar cannot judge (larger than its request limit)
	// is blocked, never let through unjudged; so is every result once the
	// sidecar is gone.
	big := `{"hook_event_name":"PostToolUse","tool_name":"Read","tool_input":{},"tool_response":"` + strings.Repeat("x", 2<<20) + `"}`
	if out := postToolUseOf(t, runBinary(t, big, nil, "hook", "claude-code", "--url", "http://"+addr)); out.Decision != "block" ||
		!strings.Contains(out.Reason, "SIDECAR_UNAVAILABLE") || !strings.Contains(out.Reason, "status 400") {
		t.Errorf("a 2 MiB result: %+v, want block naming the sidecar's 400", out)
	}
	if err := sc.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	out := postToolUseOf(t, runBinary(t, plainEvent, nil, "hook", "claude-code", "--url", "unix://"+sock))
	if out.Decision != "block" || !strings.Contains(out.Reason, "toolgate withheld the result of Read: SIDECAR_UNAVAILABLE") ||
		!strings.Contains(out.Reason, "denied (fail closed)") {
		t.Errorf("sidecar gone: %+v, want block, fail closed", out)
	}
}

// A PostToolUse event the hook cannot read is the protocol's blocking
// error, as a PreToolUse one is.
func TestHookPostToolUseMalformed(t *testing.T) {
	for name, c := range map[string]struct{ stdin, stderr string }{
		"tool_response not JSON": {`{"hook_event_name":"PostToolUse","tool_name":"Read","tool_response":nope}`, "is not a Claude Code PreToolUse or PostToolUse event: invalid character"},
		"no tool_name":           {`{"hook_event_name":"PostToolUse","tool_response":"x"}`, "has no tool_name"},
		"tool_input a string":    {`{"hook_event_name":"PostToolUse","tool_name":"Read","tool_input":"x","tool_response":"x"}`, "tool_input of Read must be a JSON object"},
	} {
		t.Run(name, func(t *testing.T) {
			o := run(t, c.stdin, "hook", "claude-code", "--bundle-dir", resultPolicies)
			if o.code != exitcode.Usage || o.stdout != "" || !strings.Contains(o.stderr, c.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 2 and %q", o.code, o.stdout, o.stderr, c.stderr)
			}
		})
	}
}
