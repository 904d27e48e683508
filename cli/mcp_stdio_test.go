package cli

import (
	"strings"
	"testing"
)

// TestMCPStdioCommandLine: flag mistakes are usage errors (exit 2) naming
// what to fix; a server that cannot start is exit 2 too; otherwise the
// guard exits with its server's status. (What it relays and decides:
// sidecar TestMCPStdioDecidesCalls and TestMCPStdioRefusesWhatItCannotRead.)
func TestMCPStdioCommandLine(t *testing.T) {
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"mcp"}, 2, "name a transport: toolgate mcp stdio"},
		{[]string{"mcp", "sse"}, 2, `unknown transport "sse"`},
		{[]string{"mcp", "stdio", "--server", "files"}, 2, "the server's command goes after --"},
		{[]string{"mcp", "stdio", "--server", "files", "echo", "--", "x"}, 2, "the server's command goes after --"},
		{[]string{"mcp", "stdio", "--", "true"}, 2, "--server NAME is required"},
		{[]string{"mcp", "stdio", "--server", "files", "--timeout", "0s", "--", "true"}, 2, "--timeout must be positive"},
		{[]string{"mcp", "stdio", "--server", "files", "--timeout", "soon", "--", "true"}, 2, "invalid argument"},
		{[]string{"mcp", "stdio", "--server", "files", "--url", "ftp://x", "--", "true"}, 2, "ftp://x"},
		{[]string{"mcp", "stdio", "--server", "files", "--url", "http://127.0.0.1:1", "--", "/nonexistent/server"}, 2, "starting the server"},
		{[]string{"mcp", "stdio", "--server", "files", "--url", "http://127.0.0.1:1", "--", "sh", "-c", "exit 7"}, 7, ""},
		{[]string{"mcp", "stdio", "--server", "files", "--url", "http://127.0.0.1:1", "--", "true"}, 0, ""},
		{[]string{"mcp", "stdio", "--server", "files", "--url", "http://127.0.0.1:1", "--bundle-dir", samplesDir, "--", "true"}, 2, "--bundle-dir decides locally, --url asks a sidecar: give one"},
		{[]string{"mcp", "stdio", "--server", "files", "--bundle-dir", "-", "--", "true"}, 2, "stdin carries the agent's messages"},
		{[]string{"mcp", "stdio", "--server", "files", "--bundle-dir", "/nonexistent/policies", "--", "true"}, 2, "--bundle-dir /nonexistent/policies:"},
		{[]string{"mcp", "stdio", "--server", "files", "--bundle-dir", samplesDir, "--", "true"}, 0, ""},
	} {
		o := runBinary(t, "", nil, c.args...)
		if o.code != c.code || !strings.Contains(o.stderr, c.want) || (c.want == "" && o.stderr != "") {
			t.Errorf("toolgate %s: exit %d, stderr %q; want exit %d with %q", strings.Join(c.args, " "), o.code, o.stderr, c.code, c.want)
		}
	}
}
