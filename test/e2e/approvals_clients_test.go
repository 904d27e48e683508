package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// typescriptClient is @toolgate/client (clients/typescript) built from its
// sources as make typescript-client builds it: dependencies from the
// lockfile when they are missing, then the build, so a stale dist is never
// what is tested.
var typescriptClient = sync.OnceValues(func() (string, error) {
	dir := filepath.Join(testenv.RepoRoot(), "clients", "typescript")
	index := filepath.Join(dir, "dist", "index.js")
	steps := [][]string{{"run", "--silent", "build"}}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err != nil {
		steps = [][]string{{"ci", "--omit=optional", "--no-audit", "--no-fund"}} // its prepare script builds
	}
	for _, args := range steps {
		cmd := exec.Command("npm", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", fmt.Errorf("npm %s in %s: %w\n%s", strings.Join(args, " "), dir, err, out)
		}
	}
	return index, nil
})

// clientRun is a client process deciding one call, its answer on stdout.
type clientRun struct {
	name string
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan error
}

func startClient(t *testing.T, name string, cmd *exec.Cmd) *clientRun {
	t.Helper()
	c := &clientRun{name: name, cmd: cmd, done: make(chan error, 1)}
	cmd.Stdout, cmd.Stderr = &c.out, &c.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	return c
}

// answer is the client's printed result once it exits.
func (c *clientRun) answer(t *testing.T, within time.Duration) map[string]any {
	t.Helper()
	select {
	case err := <-c.done:
		if err != nil {
			t.Fatalf("%s client: %v\n%s", c.name, err, c.out.String())
		}
	case <-time.After(within):
		t.Fatalf("%s client had no answer after %v:\n%s", c.name, within, c.out.String())
	}
	var got map[string]any
	if err := json.Unmarshal(bytes.TrimSpace(c.out.Bytes()), &got); err != nil {
		t.Fatalf("%s client printed %q: %v", c.name, c.out.String(), err)
	}
	return got
}

func (c *clientRun) running() bool {
	select {
	case err := <-c.done:
		c.done <- err
		return false
	default:
		return true
	}
}

// TestClientsWaitForApproval (issue 27): the Python and TypeScript clients
// and the Claude Code hook (--wait), as real processes, ask the real sidecar about a payment an ask rule
// holds, with a wait; each waits until the namespace admin approves its
// ApprovalRequest with toolgate approve, and then proceeds: allowed.
func TestClientsWaitForApproval(t *testing.T) {
	index, err := typescriptClient()
	if err != nil {
		t.Fatal(err)
	}
	r := startApprovalRig(t)
	url := "http://" + r.addr
	python := exec.Command("python3", "-c", `
import json, sys, toolgate
c = toolgate.Client(url=sys.argv[1])
r = c.evaluate("pay", metadata=toolgate.EvaluationMetadata(input={"amount": 7001}), wait=90)
print(json.dumps({"decision": r.decision, "allowed": r.allowed, "reason": r.reason, "approval": r.approval.name if r.approval else None}))
`, url)
	python.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(testenv.RepoRoot(), "clients", "python"))
	ts := exec.Command("node", "--input-type=module", "-e", `
import { Client } from `+fmt.Sprintf("%q", index)+`;
const c = new Client({ url: process.argv[1] });
const r = await c.evaluate("pay", { metadata: { input: { amount: 7002 } }, waitMs: 90000 });
console.log(JSON.stringify({ decision: r.decision, allowed: r.decision === "allow", reason: r.reason, approval: r.approval ? r.approval.name : null }));
`, url)
	// The Claude Code hook without --wait hands an ask to the person at the
	// terminal (Claude Code's own ask); with --wait it waits for the
	// Kubernetes approval.
	hookEvent := func(amount int) string {
		return fmt.Sprintf(`{"hook_event_name":"PreToolUse","session_id":"s-1","tool_name":"pay","tool_input":{"amount":%d},"tool_use_id":"toolu_1"}`, amount)
	}
	plain := exec.Command(r.bin, "hook", "claude-code", "--url", url)
	plain.Stdin = strings.NewReader(hookEvent(7000))
	out, err := plain.Output()
	var asked struct {
		HookSpecificOutput struct {
			PermissionDecision       string `json:"permissionDecision"`
			PermissionDecisionReason string `json:"permissionDecisionReason"`
		} `json:"hookSpecificOutput"`
	}
	if err != nil || json.Unmarshal(out, &asked) != nil || asked.HookSpecificOutput.PermissionDecision != "ask" ||
		!strings.Contains(asked.HookSpecificOutput.PermissionDecisionReason, "payments over 1000 need a person") {
		t.Fatalf("the hook without --wait: %v %s, want Claude Code's ask with the rule's reason", err, out)
	}
	seen := map[string]bool{}
	r.pending(seen) // the hook's ask made a request, which no one decides
	hook := exec.Command(r.bin, "hook", "claude-code", "--url", url, "--wait", "90s")
	hook.Stdin = strings.NewReader(hookEvent(7003))
	clients := []*clientRun{startClient(t, "python", python), startClient(t, "typescript", ts), startClient(t, "hook", hook)}
	names := map[string]bool{}
	for range clients {
		ar := r.pending(seen)
		names[ar.Name] = true
	}
	time.Sleep(300 * time.Millisecond) // both clients are waiting, not answered
	for _, c := range clients {
		if !c.running() {
			t.Fatalf("the %s client returned before any approval:\n%s", c.name, c.out.String())
		}
	}
	r.waitForGuards(firstKey(names))
	alice := r.kubeconfigAs("alice", "system:authenticated")
	for name := range names {
		if code, out := r.toolgateAs(alice, "approve", name); code != 0 {
			t.Fatalf("approve %s: exit %d: %s", name, code, out)
		}
	}
	for _, c := range clients {
		if c.name == "hook" {
			got := c.answer(t, 30*time.Second)
			out := fmt.Sprint(got["hookSpecificOutput"])
			if !strings.Contains(out, "permissionDecision:allow") || !strings.Contains(out, "approved by alice") {
				t.Errorf("the hook with --wait got %v, want allow approved by alice", got)
			}
			continue
		}
		got := c.answer(t, 30*time.Second)
		if got["decision"] != "allow" || got["allowed"] != true || !strings.Contains(fmt.Sprint(got["reason"]), "approved by alice") || !names[fmt.Sprint(got["approval"])] {
			t.Errorf("the %s client got %v, want allow approved by alice with its request", c.name, got)
		}
	}
}

func firstKey(m map[string]bool) string {
	for k := range m {
		return k
	}
	return ""
}
