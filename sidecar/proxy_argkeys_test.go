package sidecar

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/mcptest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// Argument keys by case: test/mcpgoserver (mark3labs/mcp-go, typed
// handlers binding with encoding/json) runs {"Path": "/secrets/key"} as
// read_file of /secrets/key, and the long s and Kelvin sign fold too
// ("ſcope" is scope, "\u212aind" is kind). A deny on input.path or
// input.scope does not see them; the proxy and the stdio guard refuse
// them, knowing the tools' schemas from a tools/list of their own (the
// agent here never lists).

// keysBundle allows everything but reading under /secrets/ and searching
// the secrets scope.
func keysBundle() engine.Bundle {
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	return engine.Bundle{Policies: []engine.Policy{{ID: "files", Version: 1, DefaultEffect: "allow", Rules: []engine.Rule{
		{ID: "no-secrets", Effect: "deny", Description: "secrets are not read by agents", Conditions: []engine.Condition{
			{Field: "tool_name", Operator: "eq", Value: raw("read_file")},
			{Field: "input.path", Operator: "starts_with", Value: raw("/secrets/")}}},
		{ID: "no-secret-search", Effect: "deny", Description: "nor searched", Conditions: []engine.Condition{
			{Field: "tool_name", Operator: "eq", Value: raw("search")},
			{Field: "input.scope", Operator: "eq", Value: raw("secrets")}}},
	}}}}
}

// checkArgumentKeys sends each call through cs: the allowed ones run, the
// policy's denies are denied, and each key differing from its schema's
// only in case is refused with an error naming it; calls is what the
// server ran, by tool and the values it bound.
func checkArgumentKeys(t *testing.T, cs *mcp.ClientSession, calls func() map[string]int) {
	t.Helper()
	for _, c := range []struct {
		tool    string
		args    map[string]any
		outcome string // "ran", "denied", or the key refused
	}{
		{"read_file", map[string]any{"path": "/etc/motd"}, "ran"},
		{"read_file", map[string]any{"path": "/secrets/key"}, "denied"},
		{"read_file", map[string]any{"Path": "/secrets/key"}, "Path"},
		{"read_file", map[string]any{"PATH": "/secrets/key"}, "PATH"},
		{"search", map[string]any{"kind": "docs", "ſcope": "secrets"}, "ſcope"},
		{"search", map[string]any{"\u212aind": "docs", "scope": "public"}, "\u212aind"},
		{"search", map[string]any{"kind": "docs", "scope": "public"}, "ran"},
	} {
		name := fmt.Sprintf("%s %v", c.tool, c.args)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: c.tool, Arguments: c.args})
		cancel()
		switch c.outcome {
		case "ran":
			if err != nil || res.IsError {
				t.Errorf("%s: %v %+v, want it run", name, err, res)
			}
		case "denied":
			if err != nil || !res.IsError {
				t.Errorf("%s: %v %+v, want the policy's deny", name, err, res)
			}
		default:
			if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("argument key %q", c.outcome)) || !strings.Contains(err.Error(), "not forwarded") {
				t.Errorf("%s: %v %+v, want it refused naming key %q", name, err, res, c.outcome)
			}
		}
	}
	if got := calls(); len(got) != 2 || got["read_file /etc/motd"] != 1 || got["search docs public"] != 1 {
		t.Fatalf("the server ran %v; want only read_file /etc/motd and search docs public", got)
	}
}

// TestMCPProxyRefusesArgumentKeysByCase: through the HTTP proxy, a key
// the server would bind to a schema property of another case is refused
// (400 with a JSON-RPC error) and never reaches it.
func TestMCPProxyRefusesArgumentKeysByCase(t *testing.T) {
	bin, err := mcptest.GoServerBinary()
	if err != nil {
		t.Fatal(err)
	}
	up := startMCPServerBinary(t, bin)
	rig := startMCPRig(t, up.base+"/mcp", keysBundle(), nil)
	// mcp-go's GET stream sends its headers at once but no event, and
	// through the proxy the headers reach the client only with the first
	// event, which the SDK client's Connect waits for: no GET stream.
	rig.noStandaloneSSE = true
	cs := rig.connect("2025-11-25", nil, nil)
	checkArgumentKeys(t, cs, func() map[string]int { return up.stats(t).Calls })
}

// TestMCPStdioRefusesArgumentKeysByCase: the same through `toolgate mcp
// stdio --bundle-dir` in front of the server over stdio.
func TestMCPStdioRefusesArgumentKeysByCase(t *testing.T) {
	tg, err := toolgateBinary()
	if err != nil {
		t.Fatal(err)
	}
	bin, err := mcptest.GoServerBinary()
	if err != nil {
		t.Fatal(err)
	}
	bundleFile := filepath.Join(t.TempDir(), "bundle.json")
	doc, _ := encode(t, keysBundle())
	must(t, os.WriteFile(bundleFile, doc, 0o644))
	stats := testenv.FreeLoopbackAddr(t)
	cmd := exec.Command(tg, "mcp", "stdio", "--server", "files", "--bundle-dir", bundleFile, "--", bin, "-stdio", "-listen", stats)
	cmd.Stderr = os.Stderr
	cs := connectStdio(t, cmd, "2025-11-25")
	checkArgumentKeys(t, cs, func() map[string]int { return stdioServerCalls(t, stats) })
}
