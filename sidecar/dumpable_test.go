//go:build linux

package sidecar

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestAttackSameUserCannotReadTheSidecarsProcess: in a Pod whose
// containers share a process namespace, code in the agent's container
// running as the sidecar's own user (an image's USER, which admission
// cannot see) read the sidecar's environment through /proc/PID/environ,
// and its files, the MCP upstream credential among them, through
// /proc/PID/root, which leads into the sidecar's own mounts. The injector
// refuses such Pods; the sidecar also makes itself non-dumpable, and the
// kernel then refuses a reader of the same user (one with CAP_SYS_PTRACE
// it does not: that is why the Pods are refused).
//
// Real processes under real users: the sidecar (the real command) and, as
// the control, a plain process of the same user, each in a mount namespace
// of its own holding a credential only it mounts, as a container does; the
// attacker runs as that user outside. Needs root, to start them.
func TestAttackSameUserCannotReadTheSidecarsProcess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatalf("run as root (CI does): the test starts the sidecar and the attacker as another user, in mount namespaces of their own (euid %d)", os.Geteuid())
	}
	base, err := os.MkdirTemp("", "toolgate-dumpable-attack-")
	must(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(base) })
	must(t, os.Chmod(base, 0o755))
	doc, _ := encode(t, denyTools("Bash"))
	bundle := filepath.Join(base, "bundle.json")
	must(t, os.WriteFile(bundle, doc, 0o644))
	self, err := os.ReadFile(os.Args[0])
	must(t, err)
	bin := filepath.Join(base, "sidecar.test")
	must(t, os.WriteFile(bin, self, 0o755)) // readable: exec'd as the user, it is dumpable unless it says otherwise

	for _, tc := range []struct {
		name, role string
		safe       bool // false: the control, where the attack must work
	}{
		{"the sidecar", "sidecar", true},
		{"control: a plain process of the same user", "idle", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := filepath.Join(base, "run-"+tc.role)
			credential := filepath.Join(base, "credential-"+tc.role) // a mount point, empty outside the target
			for _, d := range []string{run, credential} {
				must(t, os.Mkdir(d, 0o755))
				must(t, os.Chown(d, sidecarUID, sidecarUID))
			}
			sock, metrics := filepath.Join(run, "toolgate.sock"), filepath.Join(run, "metrics.sock")
			envSecret, fileSecret := "env-secret-"+tc.role, "Authorization: Bearer file-secret-"+tc.role
			target := exec.Command(bin, "-test.run=^TestDumpableHelperProcess$")
			target.Env = append(os.Environ(), "TOOLGATE_DUMPABLE_ROLE=contain", "TOOLGATE_DUMPABLE_NEXT="+tc.role,
				"TOOLGATE_DUMPABLE_DIR="+credential, "TOOLGATE_DUMPABLE_SECRET="+fileSecret, "TOOLGATE_DUMPABLE_READY="+filepath.Join(run, "ready"),
				"TOOLGATE_UPSTREAM_TOKEN="+envSecret, "TOOLGATE_TEST_ARGS="+strings.Join([]string{
					"--bundle-file=" + bundle, "--listen=unix://" + sock, "--metrics-listen=unix:" + metrics, "--decision-log=none"}, "\n"))
			// A mount namespace of its own, as a container's: the
			// credential is mounted there, and the attacker reaches it
			// only through /proc/PID/root.
			target.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS}
			logs := &lineBuffer{}
			target.Stdout, target.Stderr = logs, logs
			must(t, target.Start())
			exited := make(chan error, 1)
			go func() { exited <- target.Wait() }()
			t.Cleanup(func() {
				_ = target.Process.Signal(syscall.SIGTERM)
				if err := <-exited; err != nil {
					t.Logf("%s exited: %v", tc.role, err)
				}
				if t.Failed() {
					t.Logf("%s's log:\n%s", tc.role, logs.String())
				}
			})
			eventually(t, tc.role+" running as its user", func() bool {
				select {
				case err := <-exited:
					exited <- err
					t.Fatalf("%s exited: %v", tc.role, err)
				default:
				}
				if tc.role == "sidecar" {
					_, err := Probe(t.Context(), "unix:"+sock, "ready")
					return err == nil
				}
				_, err := os.Stat(filepath.Join(run, "ready"))
				return err == nil
			})

			attacker := exec.Command(bin, "-test.run=^TestDumpableHelperProcess$")
			attacker.Env = append(os.Environ(), "TOOLGATE_DUMPABLE_ROLE=attack",
				"TOOLGATE_DUMPABLE_PID="+strconv.Itoa(target.Process.Pid), "TOOLGATE_DUMPABLE_DIR="+credential)
			attacker.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: sidecarUID, Gid: sidecarUID}}
			out, err := attacker.Output()
			if err != nil {
				t.Fatalf("the attacker: %v\n%s\ntarget log:\n%s", err, out, logs.String())
			}
			var report map[string]string
			if err := json.Unmarshal(out, &report); err != nil {
				t.Fatalf("attacker report %q: %v", out, err)
			}
			if !strings.Contains(report["the credential, directly"], "no such file") {
				t.Fatalf("the credential is within the attacker's reach without /proc, the test shows nothing: %v", report)
			}
			if !tc.safe {
				if !strings.Contains(report["/proc/PID/environ"], envSecret) || report["/proc/PID/root"] != fileSecret {
					t.Fatalf("the control attack failed, so the test cannot tell a protected process from another: %v\n%s", report, logs.String())
				}
				t.Logf("control: as expected, the attacker read the environment and %q through /proc/PID/root", report["/proc/PID/root"])
				return
			}
			for _, what := range []string{"/proc/PID/environ", "/proc/PID/root"} {
				got := report[what]
				if strings.Contains(got, envSecret) || strings.Contains(got, fileSecret) || !strings.Contains(got, "permission denied") {
					if len(got) > 200 {
						got = got[:200] + "..."
					}
					t.Errorf("%s of the sidecar: %q, want permission denied", what, got)
				} else {
					t.Logf("%-20s refused: %s", what, got)
				}
			}
			// Its own /proc it still reads: the process metrics.
			if body := unixGet(t, metrics, "/metrics"); !strings.Contains(body, "\nprocess_open_fds ") {
				t.Errorf("the non-dumpable sidecar's metrics lack process_open_fds:\n%s", body)
			}
			if d := decideOver(t, unixClient(sock), "http://sidecar", "Bash"); d.Decision != "deny" {
				t.Errorf("the sidecar decides %+v", d)
			}
		})
	}
}

func unixGet(t *testing.T, sock, path string) string {
	t.Helper()
	resp, err := unixClient(sock).Get("http://sidecar" + path)
	must(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	must(t, err)
	return string(body)
}

// TestDumpableHelperProcess is not a test: run by
// TestAttackSameUserCannotReadTheSidecarsProcess, it is
//   - contain: as root, in the mount namespace Go unshared (and made
//     private) for it, mounts a tmpfs holding the credential, becomes the
//     sidecar's user and execs itself as the next role (an exec, so the
//     next role is as dumpable as any process its user starts);
//   - sidecar: the real `toolgate sidecar` command;
//   - idle: a plain process, waiting for SIGTERM;
//   - attack: reads the target's environment and credential, and reports.
func TestDumpableHelperProcess(t *testing.T) {
	role := os.Getenv("TOOLGATE_DUMPABLE_ROLE")
	if role == "" {
		return
	}
	if err := dumpableHelper(role); err != nil {
		fmt.Fprintln(os.Stderr, role+":", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func dumpableHelper(role string) error {
	dir := os.Getenv("TOOLGATE_DUMPABLE_DIR")
	switch role {
	case "contain":
		if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("mode=0700,uid=%d,gid=%d", sidecarUID, sidecarUID)); err != nil {
			return fmt.Errorf("mounting the credential: %w", err)
		}
		file := filepath.Join(dir, "header")
		if err := os.WriteFile(file, []byte(os.Getenv("TOOLGATE_DUMPABLE_SECRET")), 0o400); err != nil {
			return err
		}
		if err := os.Chown(file, sidecarUID, sidecarUID); err != nil {
			return err
		}
		for _, step := range []func() error{
			func() error { return syscall.Setgroups(nil) },
			func() error { return syscall.Setgid(sidecarUID) },
			func() error { return syscall.Setuid(sidecarUID) },
		} {
			if err := step(); err != nil {
				return fmt.Errorf("becoming %d: %w", sidecarUID, err)
			}
		}
		// The first of two equal names wins in Go: replace, not append.
		env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "TOOLGATE_DUMPABLE_ROLE=") })
		env = append(env, "TOOLGATE_DUMPABLE_ROLE="+os.Getenv("TOOLGATE_DUMPABLE_NEXT"))
		return syscall.Exec(os.Args[0], []string{os.Args[0], "-test.run=^TestDumpableHelperProcess$"}, env)
	case "sidecar":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		cmd := NewCommand("test")
		cmd.SetArgs(strings.Split(os.Getenv("TOOLGATE_TEST_ARGS"), "\n"))
		return cmd.ExecuteContext(ctx)
	case "idle":
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
		defer stop()
		if err := os.WriteFile(os.Getenv("TOOLGATE_DUMPABLE_READY"), nil, 0o644); err != nil {
			return err
		}
		<-ctx.Done()
		return nil
	case "attack":
		pid := os.Getenv("TOOLGATE_DUMPABLE_PID")
		report := map[string]string{}
		for what, path := range map[string]string{
			"/proc/PID/environ":        "/proc/" + pid + "/environ",
			"/proc/PID/root":           "/proc/" + pid + "/root" + filepath.Join(dir, "header"),
			"the credential, directly": filepath.Join(dir, "header"),
		} {
			data, err := os.ReadFile(path)
			if err != nil {
				report[what] = err.Error()
			} else {
				report[what] = strings.ReplaceAll(string(data), "\x00", "\n")
			}
		}
		return json.NewEncoder(os.Stdout).Encode(report)
	}
	return fmt.Errorf("unknown role %q", role)
}
