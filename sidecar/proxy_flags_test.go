package sidecar

import (
	"strings"
	"testing"
)

// TestMCPFlags: the flags reach Options and Validate reports their
// problems with the rest.
func TestMCPFlags(t *testing.T) {
	cmd := NewCommand("test")
	must(t, cmd.ParseFlags([]string{"--bundle-file", "b.json", "--mcp-upstream", "a=http://127.0.0.1:1/mcp",
		"--mcp-upstream", "b=https://x/mcp", "--mcp-listen", "127.0.0.1:0"}))
	mcpFlag := cmd.Flags().Lookup("mcp-upstream")
	if got := mcpFlag.Value.String(); got != "[a=http://127.0.0.1:1/mcp,b=https://x/mcp]" {
		t.Fatalf("--mcp-upstream %s", got)
	}
	o := DefaultOptions()
	o.BundleFile = "b.json"
	o.MCP.Upstreams = []string{"bad"}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--mcp-upstream") {
		t.Fatalf("Validate: %v", err)
	}
	o.MCP.Upstreams = []string{"a=http://127.0.0.1:1/mcp"}
	o.MCP.Listen = "127.0.0.1:8181"
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--mcp-listen 127.0.0.1:8181 is also a --listen") {
		t.Fatalf("Validate with --mcp-listen on --listen: %v", err)
	}
}
