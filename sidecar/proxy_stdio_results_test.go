package sidecar

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/mcptest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// checkJudgedResults runs the result-rule checks of resultsBundle through
// a session: redacted, withheld and structured results, as the HTTP proxy
// gives them.
func checkJudgedResults(t *testing.T, cs *mcp.ClientSession, stats string) {
	t.Helper()
	res := callTool(t, cs, "read_file", map[string]any{"path": "key=" + mcpAWSKey})
	if got := resultText(t, res); got != "contents of key=[REDACTED:aws-key]" || res.IsError {
		t.Fatalf("read_file answered %q (isError %v)", got, res.IsError)
	}
	res = callTool(t, cs, "echo", map[string]any{"texts": []string{"é " + mcpAWSKey, mcpAWSKey}})
	if got := strings.Join(texts(t, res), "|"); got != "é [REDACTED:aws-key]|[REDACTED:aws-key]" {
		t.Fatalf("echo answered %q", got)
	}
	deniedDecision(t, callTool(t, cs, "echo", map[string]any{"texts": []string{"INTERNAL ONLY"}}), "no-internal: internal documents stay inside")
	deniedDecision(t, callTool(t, cs, "query", map[string]any{"rows": 101, "payload": `{"rows":[]}`}), "rows-cap: a JSON dump of more than 100 rows")
	res = callTool(t, cs, "query", map[string]any{"rows": 100, "payload": `{"rows":[]}`})
	if sc, _ := json.Marshal(res.StructuredContent); res.IsError || string(sc) != `{"payload":"{\"rows\":[]}","rows":100}` {
		t.Fatalf("query of 100 rows: isError %v, structured %s", res.IsError, sc)
	}
	if got := stdioServerCalls(t, stats); got["echo"] != 2 || got["query"] != 2 || got["read_file"] != 1 {
		t.Fatalf("the server ran %v: every call ran, only results were judged", got)
	}
}

// TestMCPStdioJudgesResultsLocally: with --bundle-dir the guard judges the
// server's answers itself, as the proxy does, and a result past
// --max-result-bytes is withheld under a rule that would deny or redact
// it.
func TestMCPStdioJudgesResultsLocally(t *testing.T) {
	for _, version := range mcpVersions {
		t.Run(version, func(t *testing.T) {
			dir := t.TempDir()
			bundleFile := filepath.Join(dir, "bundle.json")
			doc, _ := encode(t, resultsBundle())
			must(t, os.WriteFile(bundleFile, doc, 0o644))
			stats := testenv.FreeLoopbackAddr(t)
			cs := connectStdio(t, stdioGuardCommand(t, stats, "--bundle-dir", bundleFile, "--max-result-bytes", "4096"), version)
			checkJudgedResults(t, cs, stats)

			big := strings.Repeat("harmless text ", 1000)
			res := callTool(t, cs, "echo", map[string]any{"texts": []string{big}})
			if got := resultText(t, res); !res.IsError || !strings.HasPrefix(got, "RESULT_TOO_LARGE: the result is larger than --max-result-bytes (4096 bytes)") {
				t.Fatalf("a result past the limit: isError %v, %.200q", res.IsError, got)
			}
			if got := resultText(t, callTool(t, cs, "echo", map[string]any{"texts": []string{"after"}})); got != "after" {
				t.Fatalf("the next call answered %q", got)
			}
		})
	}
}

// TestMCPStdioJudgesResultsThroughTheSidecar: without --bundle-dir the
// sidecar judges each result (/v1/evaluate with its output) and logs it.
func TestMCPStdioJudgesResultsThroughTheSidecar(t *testing.T) {
	rig := startMCPRig(t, "http://127.0.0.1:1/mcp", resultsBundle(), nil) // its HTTP proxy is not used
	stats := testenv.FreeLoopbackAddr(t)
	cs := connectStdio(t, stdioCommand(t, rig.decisions, stats), "2025-11-25")
	checkJudgedResults(t, cs, stats)
	eventually(t, "the sidecar logs the result decisions", func() bool {
		n := 0
		for _, l := range rig.logs.lines(t) {
			if l["phase"] == "result" {
				n++
			}
		}
		return n >= 5
	})
}

// TestMCPStdioSendsResultsOnlyToASidecarThatJudgesThem: the sidecar's
// answers say whether its bundle has result rules (judgesResults); without
// them the guard sends it no result, so a call costs one request, not two,
// and the results pass untouched.
func TestMCPStdioSendsResultsOnlyToASidecarThatJudgesThem(t *testing.T) {
	rig := startMCPRig(t, "http://127.0.0.1:1/mcp", mcptest.Bundle(), nil) // its HTTP proxy is not used
	stats := testenv.FreeLoopbackAddr(t)
	cs := connectStdio(t, stdioCommand(t, rig.decisions, stats), "2025-11-25")
	for range 3 {
		res := callTool(t, cs, "read_file", map[string]any{"path": "key=" + mcpAWSKey})
		if got := resultText(t, res); got != "contents of key="+mcpAWSKey || res.IsError {
			t.Fatalf("read_file answered %q (isError %v)", got, res.IsError)
		}
	}
	eventually(t, "the sidecar logs the three call decisions", func() bool {
		n := 0
		for _, l := range rig.logs.lines(t) {
			if l["tool_name"] == "read_file" {
				n++
			}
		}
		return n >= 3
	})
	for _, l := range rig.logs.lines(t) {
		if l["phase"] == "result" {
			t.Errorf("a sidecar without result rules was sent a result: %v", l)
		}
	}
}
