package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/httploop"
)

// unixClient talks HTTP over the socket at path.
func unixClient(path string) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}}}
}

func decideOver(t *testing.T, c *http.Client, base, tool string) decisionResponse {
	t.Helper()
	resp, err := c.Post(base+"/v1/evaluate", "application/json", strings.NewReader(fmt.Sprintf(`{"tool_name":%q}`, tool)))
	must(t, err)
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, data)
	}
	return decodeDecision(t, data)
}

// The socket and the loopback port serve side by side; the socket is
// created 0666 (any user in the Pod may connect) in a directory made 0755
// when missing, and the URL spelling unix:/// works as TOOLGATE_URL gives it.
func TestServesOnASocketAndAPortTogether(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run", "toolgate")
	sock := filepath.Join(dir, "toolgate.sock")
	o := testOptions()
	o.Listen = []string{"127.0.0.1:0", "unix://" + sock}
	addr, _ := limitedRun(t, o)

	fi, err := os.Stat(sock)
	must(t, err)
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != httploop.SocketMode {
		t.Errorf("socket mode %v, want a socket %v", fi.Mode(), fs.FileMode(httploop.SocketMode))
	}
	di, err := os.Stat(dir)
	must(t, err)
	if di.Mode().Perm() != 0o755 {
		t.Errorf("the socket's directory was created %v, want 0755", di.Mode().Perm())
	}
	if d := decideOver(t, unixClient(sock), "http://sidecar", "Bash"); d.Decision != "deny" || d.BundleRevision == nil {
		t.Errorf("over the socket: %+v", d)
	}
	if got := toolDecision(t, "http://"+addr, "Bash"); got != "deny" {
		t.Errorf("over TCP: %s", got)
	}
}

// A socket another process still answers on is not removed: starting a
// second sidecar on it fails, and the first keeps it.
func TestALiveSocketIsNeverReplaced(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "toolgate.sock")
	live, err := net.Listen("unix", sock)
	must(t, err)
	defer live.Close()
	o := testOptions()
	o.Listen, o.BundleFile = []string{"unix:" + sock}, filepath.Join(t.TempDir(), "b.json")
	if err := Run(t.Context(), o, nil); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("Run on a live socket: %v", err)
	}
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatalf("the live socket was taken away: %v", err)
	}
	c.Close()
}

// Code in the agent's Pod that takes the loopback port (after the sidecar
// restarts, say) and answers allow to everything reaches only the clients
// that use TCP: the socket keeps serving the real decisions, the sidecar
// says the port is not its own (listener_up 0), and takes the port back
// once it is free.
func TestASquattedPortDoesNotReachSocketClients(t *testing.T) {
	squatter, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	port := squatter.Addr().String()
	fake := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `{"decision":"allow","reason":"squatter"}`)
	})}
	go func() { _ = fake.Serve(squatter) }()
	defer fake.Close()

	sock := filepath.Join(t.TempDir(), "toolgate.sock")
	o := testOptions()
	o.Listen = []string{"unix:" + sock, port}
	_, maddr := limitedRun(t, o) // starts although the port is taken

	if d := decideOver(t, unixClient(sock), "http://sidecar", "Bash"); d.Decision != "deny" || d.BundleRevision == nil {
		t.Errorf("a socket client got %+v, not the policy's deny", d)
	}
	if _, body := get(t, "http://"+port+"/v1/evaluate"); !strings.Contains(body, "squatter") {
		t.Fatalf("the squatter is not answering: %s", body)
	}
	up := func() string {
		for _, line := range strings.Split(getBody(t, "http://"+maddr+"/metrics"), "\n") {
			if strings.HasPrefix(line, fmt.Sprintf(`toolgate_sidecar_listener_up{listener=%q} `, port)) {
				return line[strings.LastIndexByte(line, ' ')+1:]
			}
		}
		return "absent"
	}
	if got := up(); got != "0" {
		t.Errorf("listener_up for the squatted port: %s, want 0", got)
	}

	must(t, fake.Close())
	eventually(t, "the port taken back", func() bool { return up() == "1" })
	if got := toolDecision(t, "http://"+port, "Bash"); got != "deny" {
		t.Errorf("over TCP once the port is back: %s", got)
	}
}

// sidecarUID and agentUID play the injected Pod's users: the sidecar's own
// (webhook.DefaultSidecarUID) and an agent's ordinary one.
const (
	sidecarUID = 64181
	agentUID   = 1000
)

// The attack of issue 10 §4, with real processes under real users: the
// sidecar runs as its own user; the agent, as another, tries to remove,
// rename, chmod and replace the socket, and to plant its own next to it.
// Two layouts: the socket's directory owned by the sidecar (mode 0755), and
// the injected one, an emptyDir kubelet makes 0777 that the agent's
// containers mount read-only (played with a read-only bind mount in the
// agent's own mount namespace). Both must leave the agent unable to touch
// the socket and still able to ask it for decisions.
//
// It needs root, to start processes as other users and to mount; without
// it, TestServesOnASocketAndAPortTogether checks the modes alone, which
// show nothing about an attacker.
func TestTheAgentCannotReplaceTheSocket(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatalf("run as root (CI does): the test starts the sidecar and the attacker as two other users, and cannot show the attack fail otherwise (euid %d)", os.Geteuid())
	}
	base, err := os.MkdirTemp("", "toolgate-socket-attack-")
	must(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	must(t, os.Chmod(base, 0o755)) // the sidecar's user reads the bundle here
	doc, _ := encode(t, denyTools("Bash"))
	bundle := filepath.Join(base, "bundle.json")
	must(t, os.WriteFile(bundle, doc, 0o644))
	// The test binary plays both processes; go test keeps it where only
	// root may read it.
	self, err := os.ReadFile(os.Args[0])
	must(t, err)
	bin := filepath.Join(base, "sidecar.test")
	must(t, os.WriteFile(bin, self, 0o755))

	for _, tc := range []struct {
		name     string
		dirMode  fs.FileMode
		dirOwner int
		readOnly bool // the agent sees the directory through a read-only mount
		attacker int  // the agent's user
		safe     bool // false: the control, where the attack must work
	}{
		{"directory owned by the sidecar", 0o755, sidecarUID, false, agentUID, true},
		{"emptyDir mounted read-only in the agent", 0o777, 0, true, agentUID, true},
		// Root in the agent's container, without CAP_SYS_ADMIN to remount
		// (containers do not get it by default), meets the same read-only
		// mount. This test's root keeps the capability and simply does not
		// use it: what it shows is that no write on the mount gets through.
		{"emptyDir mounted read-only, agent as root", 0o777, 0, true, 0, true},
		// The control: the emptyDir mounted read-write into the agent, as
		// before this change. The same attack must succeed, or the test
		// proves nothing.
		{"control: emptyDir mounted read-write in the agent", 0o777, 0, false, agentUID, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, err := os.MkdirTemp(base, "run-")
			must(t, err)
			must(t, os.Chown(dir, tc.dirOwner, tc.dirOwner))
			must(t, os.Chmod(dir, tc.dirMode))
			sock := filepath.Join(dir, "toolgate.sock")

			sidecar := helperProcess(t, bin, "sidecar", map[string]string{"TOOLGATE_TEST_ARGS": strings.Join([]string{
				"--bundle-file=" + bundle, "--listen=unix://" + sock, "--decision-log=none"}, "\n")})
			sidecar.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: sidecarUID, Gid: sidecarUID}}
			// The process writes its log while the test reads it.
			logs := &lineBuffer{}
			sidecar.Stderr = logs
			must(t, sidecar.Start())
			t.Cleanup(func() {
				_ = sidecar.Process.Signal(syscall.SIGTERM)
				_ = sidecar.Wait()
			})
			eventually(t, "the sidecar ready on its socket", func() bool {
				_, err := Probe(t.Context(), "unix:"+sock, "ready")
				return err == nil
			})
			before, err := os.Stat(sock)
			must(t, err)
			if st := before.Sys().(*syscall.Stat_t); st.Uid != sidecarUID || before.Mode().Perm() != httploop.SocketMode {
				t.Fatalf("socket owned by %d with mode %v, want %d and %v", st.Uid, before.Mode().Perm(), sidecarUID, fs.FileMode(httploop.SocketMode))
			}

			agent := helperProcess(t, bin, "agent", map[string]string{"TOOLGATE_TEST_SOCKET": sock,
				"TOOLGATE_TEST_UID": strconv.Itoa(tc.attacker), "TOOLGATE_TEST_READONLY": strconv.FormatBool(tc.readOnly)})
			if tc.readOnly {
				agent.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
			}
			out, err := agent.Output()
			if err != nil {
				t.Fatalf("the agent process: %v\n%s", err, out)
			}
			var report map[string]string
			if err := json.Unmarshal(out, &report); err != nil {
				t.Fatalf("agent report %q: %v", out, err)
			}
			if !tc.safe {
				if report["remove the socket"] != "" || report["bind its own socket beside it"] != "" {
					t.Fatalf("the control attack failed, so the test cannot tell a safe layout from an unsafe one: %v", report)
				}
				t.Logf("control: as expected, the agent removed the socket and bound its own beside it")
				return
			}
			for _, step := range agentAttacks {
				if got, ok := report[step]; !ok || got == "" {
					t.Errorf("the agent could %s", step)
				} else {
					t.Logf("%-40s refused: %s", step, got)
				}
			}
			if got := report["decision"]; got != "deny" {
				t.Errorf("the agent asked for Bash over the socket and got %q, want the policy's deny", got)
			}

			after, err := os.Stat(sock)
			must(t, err)
			if !os.SameFile(before, after) || after.Mode() != before.Mode() {
				t.Errorf("the socket changed: %v -> %v", before.Mode(), after.Mode())
			}
			if d := decideOver(t, unixClient(sock), "http://sidecar", "Bash"); d.Decision != "deny" {
				t.Errorf("after the attack: %+v", d)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("the directory holds %d entries, want the socket alone", len(entries))
			}
			t.Logf("sidecar log:\n%s", logs.String())
		})
	}
}

// agentAttacks are the steps the agent process tries, each of which must
// fail. Through the read-only mount, renaming a file over the socket fails
// with EXDEV (the file cannot be on that mount to begin with): that step
// shows something only in the sidecar-owned layout.
var agentAttacks = []string{
	"remove the socket", "rename the socket away", "rename a file over the socket",
	"chmod the socket 0600", "create a file beside the socket", "bind its own socket beside it",
}

// helperProcess runs bin, a copy of this test binary, as role (see
// TestHelperProcess).
func helperProcess(t *testing.T, bin, role string, env map[string]string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), "TOOLGATE_TEST_PROCESS="+role)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	return cmd
}

// TestHelperProcess is not a test: run by helperProcess, it is the sidecar
// (the real command) or the attacking agent.
func TestHelperProcess(t *testing.T) {
	switch os.Getenv("TOOLGATE_TEST_PROCESS") {
	case "":
		return
	case "sidecar":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		cmd := NewCommand("test")
		cmd.SetArgs(strings.Split(os.Getenv("TOOLGATE_TEST_ARGS"), "\n"))
		if err := cmd.ExecuteContext(ctx); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	case "agent":
		report, err := attackSocket(os.Getenv("TOOLGATE_TEST_SOCKET"), os.Getenv("TOOLGATE_TEST_UID"), os.Getenv("TOOLGATE_TEST_READONLY") == "true")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		_ = json.NewEncoder(os.Stdout).Encode(report)
		os.Exit(0)
	}
}

// attackSocket is the agent: it sets up its view (a read-only bind mount of
// the socket's directory, in the mount namespace Go unshared for it),
// becomes its user, and tries every way to take the socket over. The
// report maps each step to its error, "" when it succeeded.
func attackSocket(sock, uid string, readOnly bool) (map[string]string, error) {
	dir := filepath.Dir(sock)
	if readOnly {
		if err := syscall.Mount(dir, dir, "", syscall.MS_BIND, ""); err != nil {
			return nil, fmt.Errorf("bind mount: %w", err)
		}
		if err := syscall.Mount("", dir, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
			return nil, fmt.Errorf("read-only remount: %w", err)
		}
	}
	id, err := strconv.Atoi(uid)
	if err != nil {
		return nil, err
	}
	if id != 0 {
		if err := syscall.Setgroups(nil); err != nil {
			return nil, err
		}
		if err := syscall.Setgid(id); err != nil {
			return nil, err
		}
		if err := syscall.Setuid(id); err != nil {
			return nil, err
		}
	}
	report := map[string]string{}
	try := func(step string, err error) {
		report[step] = ""
		if err != nil {
			report[step] = err.Error()
		}
	}
	try("remove the socket", os.Remove(sock))
	try("rename the socket away", os.Rename(sock, sock+".old"))
	decoy := filepath.Join(os.TempDir(), fmt.Sprintf("decoy-%d", os.Getpid()))
	if err := os.WriteFile(decoy, nil, 0o644); err != nil {
		return nil, err
	}
	defer os.Remove(decoy)
	try("rename a file over the socket", os.Rename(decoy, sock))
	try("chmod the socket 0600", os.Chmod(sock, 0o600))
	try("create a file beside the socket", os.WriteFile(filepath.Join(dir, "evil"), []byte("x"), 0o644))
	ln, err := net.Listen("unix", filepath.Join(dir, "evil.sock"))
	if err == nil {
		ln.Close()
	}
	try("bind its own socket beside it", err)

	resp, err := unixClient(sock).Post("http://sidecar/v1/evaluate", "application/json", strings.NewReader(`{"tool_name":"Bash"}`))
	if err != nil {
		report["decision"] = "unreachable: " + err.Error()
		return report, nil
	}
	defer resp.Body.Close()
	var d struct {
		Decision string `json:"decision"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&d); err != nil {
		return nil, errors.Join(errors.New("decoding the decision"), err)
	}
	report["decision"] = d.Decision
	return report, nil
}
