package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/exitcode"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestBinary builds cmd/toolgate once and runs it as a real process, to show
// exit codes, streams and the version stamp end to end.
func TestBinary(t *testing.T) {
	exe := func(stdin string, args ...string) outcome { return runBinary(t, stdin, nil, args...) }

	if o := exe("", "version"); o.code != 0 || !strings.HasPrefix(o.stdout, "toolgate v9.8.7 (commit abc123, ") {
		t.Errorf("version: exit %d, stdout %q", o.code, o.stdout)
	}

	deny := exe("", "eval", "-f", samplesDir, "--request", filepath.Join(samplesDir, "requests", "bash_rm_rf.json"), "--now", sampleNow)
	if res := oneResult(t, deny); res.Decision != engine.Deny || res.MatchedRuleID != "no-rm-rf" {
		t.Errorf("rm -rf: %+v", res)
	}
	allow := exe(`{"tool_name":"Bash","input":{"command":"ls"}}`, "eval", "-f", samplesDir, "--request", "-", "--explain", "--now", sampleNow)
	if res := oneResult(t, allow); res.Decision != engine.Allow || len(res.Trace) == 0 {
		t.Errorf("ls with --explain: %+v", res)
	}

	bad := exe(`{"tool_name": 7}`, "eval", "-f", samplesDir, "--request", "-")
	if bad.code != exitcode.Usage || bad.stdout != "" || bad.stderr != "--request <stdin>: bad request: tool_name must be a string, not a number\n" {
		t.Errorf("bad request: exit %d, stdout %q, stderr %q", bad.code, bad.stdout, bad.stderr)
	}

	dir := testenv.WriteTree(t, map[string]string{"p.yaml": "apiVersion: toolgate.dev/v1alpha1\nkind: Policy\nmetadata: {name: p}\nspec:\n  rules: [{id: r, effect: maybe}]\n"})
	if o := exe("", "validate", "-f", dir); o.code != exitcode.Problems || !strings.Contains(o.stdout, `spec.rules[0].effect: Unsupported value: "maybe": supported values: "allow", "deny"`) {
		t.Errorf("validate: exit %d, stdout %q", o.code, o.stdout)
	}
	if o := exe("", "validate", "-f", samplesDir); o.code != 0 {
		t.Errorf("validate samples: exit %d, %s%s", o.code, o.stdout, o.stderr)
	}

	b := exe("", "bundle", "-f", samplesDir, "--now", sampleNow)
	if inProcess := run(t, "", "bundle", "-f", samplesDir, "--now", sampleNow); b.code != 0 || b.stdout != inProcess.stdout {
		t.Errorf("bundle from the binary differs from in-process: exit %d", b.code)
	}
	if !json.Valid([]byte(b.stdout)) {
		t.Errorf("bundle output is not JSON: %q", b.stdout)
	}
	if _, err := engine.Decode([]byte(b.stdout)); err != nil {
		t.Errorf("bundle does not decode: %v", err)
	}

	if o := exe("", "eval", "-f", filepath.Join(dir, "missing.yaml"), "--request", "-"); o.code != exitcode.Usage {
		t.Errorf("missing path: exit %d", o.code)
	}
}
