package cli

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/internal/exitcode"
)

// TestMCPPinErrors: every bad command line is a usage error naming what
// is wrong; a server that cannot be pinned is exit 1 saying why
// (unreachable, not MCP, no tools).
func TestMCPPinErrors(t *testing.T) {
	notMCP := httptest.NewServer(http.NotFoundHandler())
	defer notMCP.Close()
	empty := sdk.NewServer(&sdk.Implementation{Name: "empty", Version: "1"}, nil)
	noTools := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return empty }, nil))
	defer noTools.Close()
	badHeader := filepath.Join(t.TempDir(), "header")
	if err := os.WriteFile(badHeader, []byte("Bearer abc\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"mcp", "pin"}, exitcode.Usage, "give the server's URL, or --stdio -- COMMAND [ARG...]"},
		{[]string{"mcp", "pin", "a", "b"}, exitcode.Usage, "give the server's URL"},
		{[]string{"mcp", "pin", "--", "http://x/"}, exitcode.Usage, "give the server's URL"},
		{[]string{"mcp", "pin", "ftp://x/mcp"}, exitcode.Usage, `"ftp://x/mcp" is not an http or https URL`},
		{[]string{"mcp", "pin", "mcp.example/mcp"}, exitcode.Usage, "is not an http or https URL"},
		{[]string{"mcp", "pin", "--stdio"}, exitcode.Usage, "--stdio starts the server given after --"},
		{[]string{"mcp", "pin", "--stdio", "server"}, exitcode.Usage, "--stdio starts the server given after --"},
		{[]string{"mcp", "pin", "-o", "text", "http://x/"}, exitcode.Usage, "-o text: pin prints yaml or json"},
		{[]string{"mcp", "pin", "-o", "xml", "http://x/"}, exitcode.Usage, "-o must be one of"},
		{[]string{"mcp", "pin", "--timeout", "0s", "http://x/"}, exitcode.Usage, "--timeout 0s: must be positive"},
		{[]string{"mcp", "pin", "--header-file", "/nonexistent/h", "http://x/"}, exitcode.Usage, "--header-file: open /nonexistent/h"},
		{[]string{"mcp", "pin", "--header-file", badHeader, "http://x/"}, exitcode.Usage, `is not a header line "Name: value"`},
		{[]string{"mcp", "pin", "--header-file", badHeader, "--stdio", "--", "true"}, exitcode.Usage, "a --stdio server gets no HTTP headers"},
		{[]string{"mcp", "pin", "http://127.0.0.1:1/mcp"}, 1, "toolgate mcp pin http://127.0.0.1:1/mcp: not reachable as an MCP server"},
		{[]string{"mcp", "pin", notMCP.URL}, 1, "not reachable as an MCP server"},
		{[]string{"mcp", "pin", noTools.URL}, 1, "nothing to pin"},
		{[]string{"mcp", "pin", "--stdio", "--", "/nonexistent/server"}, 1, "not reachable as an MCP server"},
		{[]string{"mcp", "pin", "--stdio", "--", "true"}, 1, "not reachable as an MCP server"},
	} {
		o := run(t, "", c.args...)
		if o.code != c.code || !strings.Contains(o.stderr, c.want) || o.stdout != "" {
			t.Errorf("toolgate %s: exit %d, stdout %q, stderr %q; want exit %d with %q", strings.Join(c.args, " "), o.code, o.stdout, o.stderr, c.code, c.want)
		}
	}
}

// TestMCPStdioPinsFlag: a --pins file that cannot be read, is malformed or
// pins another server is refused at start, saying what is wrong.
func TestMCPStdioPinsFlag(t *testing.T) {
	dir := t.TempDir()
	digest := strings.Repeat("ab", 32)
	files := map[string]string{
		"bad-digest.yaml": "pinnedTools: {read_file: ABC}\n",
		"bad-mode.yaml":   "pinning: lax\npinnedTools: {read_file: " + digest + "}\n",
		"other.yaml":      "apiVersion: toolgate.dev/v1alpha1\nkind: MCPUpstream\nmetadata: {name: github}\nspec: {url: 'https://x/', pinnedTools: {a: " + digest + "}}\n",
		"policy.yaml":     "apiVersion: toolgate.dev/v1alpha1\nkind: Policy\nmetadata: {name: p}\nspec: {rules: [{id: a, effect: allow}]}\n",
		"empty.yaml":      "",
	}
	for name, doc := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for file, want := range map[string]string{
		"missing.yaml":    "--pins: open " + filepath.Join(dir, "missing.yaml"),
		"bad-digest.yaml": `pinned tool "read_file": digest "ABC" is not 64 lower-case hex digits`,
		"bad-mode.yaml":   `pinning "lax" is neither strict nor warn`,
		"other.yaml":      `pins MCPUpstream "github", not --server "files"`,
		"policy.yaml":     `kind "Policy": want an MCPUpstream`,
		"empty.yaml":      "no pinnedTools",
	} {
		path := filepath.Join(dir, file)
		o := run(t, "", "mcp", "stdio", "--server", "files", "--url", "http://127.0.0.1:1", "--pins", path, "--", "true")
		if o.code != exitcode.Usage || !strings.Contains(o.stderr, "toolgate mcp stdio: --pins") || !strings.Contains(o.stderr, want) {
			t.Errorf("--pins %s: exit %d, stderr %q; want a usage error with %q", file, o.code, o.stderr, want)
		}
	}
}
