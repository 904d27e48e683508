package cli

import (
	"bufio"
	"errors"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
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
		{[]string{"mcp"}, 2, "name a subcommand: toolgate mcp pin or toolgate mcp stdio"},
		{[]string{"mcp", "sse"}, 2, `unknown subcommand "sse"`},
		{[]string{"mcp", "stdio", "--server", "files"}, 2, "the server's command goes after --"},
		{[]string{"mcp", "stdio", "--server", "files", "echo", "--", "x"}, 2, "the server's command goes after --"},
		{[]string{"mcp", "stdio", "--", "true"}, 2, "--server NAME is required"},
		{[]string{"mcp", "stdio", "--server", "files", "--timeout", "0s", "--", "true"}, 2, "--timeout must be positive"},
		{[]string{"mcp", "stdio", "--server", "files", "--timeout", "soon", "--", "true"}, 2, "invalid argument"},
		{[]string{"mcp", "stdio", "--server", "files", "--url", "ftp://x", "--", "true"}, 2, `toolgate mcp stdio: --url "ftp://x": want unix:///path/to.sock`},
		{[]string{"mcp", "stdio", "--server", "files", "--url", "http://127.0.0.1:1", "--", "/nonexistent/server"}, 2, "starting the server"},
		{[]string{"mcp", "stdio", "--server", "files", "--url", "http://127.0.0.1:1", "--", "sh", "-c", "exit 7"}, 7, ""},
		{[]string{"mcp", "stdio", "--server", "files", "--url", "http://127.0.0.1:1", "--", "true"}, 0, ""},
		{[]string{"mcp", "stdio", "--server", "files", "--url", "http://127.0.0.1:1", "--", "sh", "-c", "kill -TERM $$"}, 128 + 15, ""},
		{[]string{"mcp", "stdio", "--server", "files", "--url", "http://127.0.0.1:1", "--bundle-dir", samplesDir, "--", "true"}, 2, "--bundle-dir decides locally, --url asks a sidecar: give one"},
		{[]string{"mcp", "stdio", "--server", "files", "--bundle-dir", "-", "--", "true"}, 2, "stdin carries the agent's messages"},
		{[]string{"mcp", "stdio", "--server", "files", "--bundle-dir", "/nonexistent/policies", "--", "true"}, 2, "--bundle-dir /nonexistent/policies:"},
		{[]string{"mcp", "stdio", "--server", "files", "--bundle-dir", samplesDir, "--", "true"}, 0, ""},
		{[]string{"mcp", "stdio", "--server", "files", "--max-result-bytes", "0", "--bundle-dir", samplesDir, "--", "true"}, 2, "--max-result-bytes must be from 1024 to 1073741824, not 0"},
		{[]string{"mcp", "stdio", "--server", "files", "--max-result-bytes", "1023", "--", "true"}, 2, "--max-result-bytes must be from 1024"},
		{[]string{"mcp", "stdio", "--server", "files", "--max-result-bytes", "2147483648", "--", "true"}, 2, "--max-result-bytes must be from 1024"},
		{[]string{"mcp", "stdio", "--server", "files", "--max-result-bytes", "4Mi", "--", "true"}, 2, "invalid argument"},
		{[]string{"mcp", "stdio", "--server", "files", "--max-result-bytes", "1024", "--bundle-dir", samplesDir, "--", "true"}, 0, ""},
	} {
		o := runBinary(t, "", nil, c.args...)
		if o.code != c.code || !strings.Contains(o.stderr, c.want) || (c.want == "" && o.stderr != "") {
			t.Errorf("toolgate %s: exit %d, stderr %q; want exit %d with %q", strings.Join(c.args, " "), o.code, o.stderr, c.code, c.want)
		}
	}
}

// TestMCPStdioPassesSignalsOn: a SIGTERM the agent sends toolgate reaches
// the server, which decides how to end; toolgate exits with its status.
func TestMCPStdioPassesSignalsOn(t *testing.T) {
	cmd := exec.Command(toolgateBinary(t), "mcp", "stdio", "--server", "files", "--url", "http://127.0.0.1:1", "--",
		"sh", "-c", `trap 'exit 42' TERM; echo ready; while :; do sleep 0.05; done`)
	cmd.Stdin = strings.NewReader("")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The server's first line relayed: its trap is set.
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("relayed %q, %v", line, err)
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 42 {
			t.Fatalf("toolgate ended with %v, want the server's exit 42 after its TERM trap", err)
		}
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("toolgate did not end after SIGTERM")
	}
}
