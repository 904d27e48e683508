package cli

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestHookSidecar runs the real toolgate binary twice over: as the sidecar,
// serving the sample policies on a Unix socket and a loopback port, and as
// the hook Claude Code would spawn.
func TestHookSidecar(t *testing.T) {
	dir := t.TempDir()
	bin := toolgateBinary(t)
	b := run(t, "", "bundle", "-f", samplesDir, "-f", testenv.WriteTree(t, map[string]string{"fields.yaml": fieldsPolicy}))
	if b.code != 0 {
		t.Fatalf("bundle: exit %d: %s", b.code, b.stderr)
	}
	bundleFile := filepath.Join(dir, "bundle.json")
	if err := os.WriteFile(bundleFile, []byte(b.stdout), 0o644); err != nil {
		t.Fatal(err)
	}

	sock := filepath.Join(dir, "toolgate.sock")
	addr := testenv.FreeLoopbackAddr(t)
	sidecar := exec.Command(bin, "sidecar", "--bundle-file", bundleFile, "--decision-log", "none",
		"--listen", "unix://"+sock, "--listen", addr)
	// A file, not a buffer: the process writes it while Eventually reads.
	logFile, err := os.Create(filepath.Join(dir, "sidecar.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = logFile.Close() }()
	sidecar.Stdout, sidecar.Stderr = logFile, logFile
	if err := sidecar.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = sidecar.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = sidecar.Process.Signal(syscall.SIGCONT)
		_ = sidecar.Process.Kill()
		<-exited
	})
	testenv.Eventually(t, "the sidecar is ready", func() (bool, string) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			log, _ := os.ReadFile(logFile.Name())
			return false, err.Error() + "\n" + string(log)
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})

	// hook runs the binary as Claude Code does: the event on stdin, the
	// environment given (TOOLGATE_URL or nothing).
	hook := func(stdin string, env []string, args ...string) outcome {
		return runBinary(t, stdin, env, append([]string{"hook", "claude-code"}, args...)...)
	}

	unixURL, tcpURL := "unix://"+sock, "http://"+addr
	for _, c := range sampleHookCases {
		t.Run(c.file, func(t *testing.T) {
			checkHookCase(t, c, hook(hookEvent(t, c.file), nil, "--url", unixURL))
			checkHookCase(t, c, hook(hookEvent(t, c.file), []string{"TOOLGATE_URL=" + tcpURL}))
			checkHookCase(t, c, hook(hookEvent(t, c.file), []string{"TOOLGATE_URL=" + unixURL}))
		})
	}
	if d := hookDecisionOf(t, hook(globEvent, nil, "--url", tcpURL, "--agent-id", "dev-1")); d.PermissionDecision != "allow" {
		t.Errorf("the sidecar did not get every field: %+v", d)
	}

	// A malformed event is a blocking error from the binary too: exit 2,
	// the reason on stderr, nothing on stdout.
	if o := hook("not json", nil, "--url", unixURL); o.code != 2 || o.stdout != "" ||
		!strings.HasPrefix(o.stderr, "toolgate hook claude-code: the hook event on stdin is not a Claude Code PreToolUse or PostToolUse event") {
		t.Errorf("malformed event: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}

	// A request the sidecar refuses (more JSON values than it decodes) is
	// a non-200: denied, with the sidecar's error.
	wide := `{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"xs":[` + strings.Repeat("0,", 20000) + `0]}}`
	if d := hookDecisionOf(t, hook(wide, nil, "--url", tcpURL)); d.PermissionDecision != "deny" ||
		!strings.Contains(d.PermissionDecisionReason, "status 400") || !strings.Contains(d.PermissionDecisionReason, "denied (fail closed)") {
		t.Errorf("non-200: %+v", d)
	}
	// A bad TOOLGATE_URL is read only when a call comes: the call is
	// denied, naming the variable (a bad --url is a usage error:
	// TestHookRefusesFlagsThatCannotDecide).
	if d := hookDecisionOf(t, hook(hookEvent(t, "bash_ls.json"), []string{"TOOLGATE_URL=ftp://" + addr})); d.PermissionDecision != "deny" ||
		!strings.Contains(d.PermissionDecisionReason, `TOOLGATE_URL "ftp://`+addr+`": want unix:///path/to.sock or http://host:port`) {
		t.Errorf("bad URL: %+v", d)
	}

	// A stopped sidecar accepts connections (the kernel does) but never
	// answers: the hook denies at --timeout instead of hanging.
	if err := sidecar.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	for _, url := range []string{unixURL, tcpURL} {
		start := time.Now()
		d := hookDecisionOf(t, hook(hookEvent(t, "bash_ls.json"), nil, "--url", url, "--timeout", "300ms"))
		if d.PermissionDecision != "deny" || !strings.Contains(d.PermissionDecisionReason, "gave no decision, denied (fail closed): no answer within 300ms") {
			t.Errorf("stopped sidecar at %s: %+v", url, d)
		}
		if took := time.Since(start); took > 20*time.Second {
			t.Errorf("the hook took %s with --timeout 300ms", took)
		}
	}
	if err := sidecar.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	checkHookCase(t, sampleHookCases[0], hook(hookEvent(t, "bash_ls.json"), nil, "--url", unixURL))

	// Sidecar gone: every call is denied, saying so.
	if err := sidecar.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-exited
	for _, url := range []string{unixURL, tcpURL} {
		d := hookDecisionOf(t, hook(hookEvent(t, "bash_ls.json"), []string{"TOOLGATE_URL=" + url}))
		if d.PermissionDecision != "deny" || !strings.Contains(d.PermissionDecisionReason, "SIDECAR_UNAVAILABLE: toolgate sidecar at "+url+" gave no decision, denied (fail closed)") {
			t.Errorf("sidecar down at %s: %+v", url, d)
		}
	}
}
