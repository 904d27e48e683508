// Command demo is `make demo`: it brings up toolgate on this machine (a real
// kube-apiserver and etcd, the operator with its webhooks, a sidecar), applies
// config/samples with kubectl, and tells the story of real decisions. It stops
// everything it started unless -keep is given.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/internal/localcluster"
	"github.com/toolgate/toolgate/internal/testenv"
)

func main() {
	keep := flag.Bool("keep", false, "keep everything running until Ctrl-C")
	noKubectl := flag.Bool("no-kubectl", false, "use the Go client even when kubectl is installed")
	flag.Parse()
	if err := run(os.Stdout, *keep, *noKubectl); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

type demo struct {
	out        io.Writer
	kubeconfig string
	socket     string // the sidecar's Unix socket, which the demo asks
	client     *http.Client
	kubectl    string
	fallback   goKubectl
}

func run(out io.Writer, keep, noKubectl bool) error {
	dir, err := os.MkdirTemp("", "toolgate-demo")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }

	say("==> building toolgate and the local control plane (first run: ~15 min, then cached in bin/)")
	bin, err := localcluster.BuildToolgate(dir)
	if err != nil {
		return err
	}
	cluster, err := localcluster.Start(dir)
	if err != nil {
		return err
	}
	defer cluster.Stop()
	say("==> kube-apiserver and etcd are up at %s", cluster.Config.Host)

	mgr, err := cluster.StartProcess("manager", bin, cluster.ManagerArgs()...)
	if err != nil {
		return err
	}
	addr, err := sidecarAddr()
	if err != nil {
		return err
	}
	// The socket, as in an injected Pod, where agents should ask; the port
	// beside it for clients that cannot use one.
	sock := filepath.Join(dir, "toolgate.sock")
	if _, err := cluster.StartProcess("sidecar", bin, "sidecar", "--configmap", "demo/toolgate-bundle",
		"--kubeconfig", cluster.Kubeconfig, "--listen", "unix://"+sock, "--listen", addr, "--decision-log", "stdout"); err != nil {
		return err
	}
	d := &demo{out: out, kubeconfig: cluster.Kubeconfig, socket: sock, client: unixClient(sock), fallback: goKubectl{c: cluster.Client}}
	if path, err := exec.LookPath("kubectl"); err == nil && !noKubectl {
		d.kubectl = path
	} else {
		say("==> kubectl not found: the demo applies manifests with the Go client instead")
	}
	say("==> the operator (toolgate manager, with its webhooks) and a sidecar on %s and %s are running", sock, addr)

	if _, err := d.kubectlRun("create", "namespace", "demo"); err != nil {
		return err
	}
	// Wait for the webhook to serve, so the first apply is validated.
	if err := waitUntil(30*time.Second, func() bool {
		_, err := d.kubectlRun("apply", "--dry-run=server", "-n", "demo", "-f", filepath.Join(testenv.RepoRoot(), "config/samples/policy_pay_cap.yaml"))
		return err == nil
	}); err != nil {
		return fmt.Errorf("the webhook never answered: %w\n%s", err, mgr.LogTail(2000))
	}
	say("\n$ kubectl apply -n demo -k config/samples/")
	applied, err := d.kubectlRun("apply", "-n", "demo", "-k", filepath.Join(testenv.RepoRoot(), "config/samples"))
	if err != nil {
		return err
	}
	say("%s", indent(applied))
	pay := map[string]any{"tool_name": "pay", "agent_id": "demo-agent", "kwargs": map[string]any{"amount": 5000}}
	if err := waitUntil(30*time.Second, func() bool {
		// kubectl applies one object at a time: wait for a bundle holding them all.
		return d.decide(req("Bash", "demo-agent", "ls -la")).Decision == "allow" && d.decide(pay).MatchedRule == "pay-over-cap"
	}); err != nil {
		return fmt.Errorf("the sidecar never loaded the samples: %w", err)
	}

	say("\n--- 1. Read-only shell commands are allowed")
	d.show(req("Bash", "demo-agent", "ls -la"))
	say("\n--- 2. rm -rf is denied, with the rule's reason")
	d.show(req("Bash", "demo-agent", "ls build && rm -rf build"))
	say("\n--- 3. Payments above 1000 are denied")
	d.show(pay)

	say("\n--- 4. A Policy with a regex RE2 cannot compile is rejected at apply time")
	bad := filepath.Join(dir, "bad-regex.yaml")
	if err := os.WriteFile(bad, []byte(badPolicy), 0o600); err != nil {
		return err
	}
	say("$ kubectl apply -n demo -f bad-regex.yaml")
	msg, err := d.kubectlRun("apply", "-n", "demo", "-f", bad)
	if err == nil {
		return fmt.Errorf("the bad regex was accepted:\n%s", msg)
	}
	say("%s", indent(msg))

	say("\n--- 5. Freeze an agent: every call it makes is denied (AGENT_FROZEN)")
	freeze := filepath.Join(dir, "freeze.yaml")
	if err := os.WriteFile(freeze, []byte(freezeManifest), 0o600); err != nil {
		return err
	}
	say("$ kubectl apply -n demo -f freeze.yaml")
	start := time.Now()
	if out, err := d.kubectlRun("apply", "-n", "demo", "-f", freeze); err != nil {
		return err
	} else {
		say("%s", indent(out))
	}
	ls := req("Bash", "demo-agent", "ls -la")
	if err := waitUntil(10*time.Second, func() bool { return d.decide(ls).Code == "AGENT_FROZEN" }); err != nil {
		return fmt.Errorf("the freeze never reached the sidecar: %w", err)
	}
	say("    (the sidecar denied demo-agent %d ms after kubectl apply)", time.Since(start).Milliseconds())
	d.show(ls)

	say("\n--- 6. Unfreeze: allowed again")
	say("$ kubectl delete -n demo frozenagent freeze-demo-agent")
	if _, err := d.kubectlRun("delete", "-n", "demo", "frozenagent", "freeze-demo-agent"); err != nil {
		return err
	}
	if err := waitUntil(10*time.Second, func() bool { return d.decide(ls).Decision == "allow" }); err != nil {
		return fmt.Errorf("the unfreeze never reached the sidecar: %w", err)
	}
	d.show(ls)

	say("\n$ kubectl get policies,frozenagents -n demo")
	if got, err := d.kubectlRun("get", "policies,frozenagents", "-n", "demo"); err == nil {
		say("%s", indent(got))
	}

	if keep {
		say("\n==> still running. Try:\n    export KUBECONFIG=%s\n    curl -s --unix-socket %s -XPOST http://sidecar/v1/evaluate -d '{\"tool_name\":\"Bash\",\"input\":{\"command\":\"rm -rf /\"}}'\n    curl -s -XPOST http://%s/v1/evaluate -d '{\"tool_name\":\"Read\"}'\n    Ctrl-C stops everything.", cluster.Kubeconfig, sock, addr)
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		<-ctx.Done()
	}
	say("\n==> stopping everything the demo started")
	return nil
}

const badPolicy = `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata:
  name: bad-regex
spec:
  rules:
  - id: no-secrets
    effect: deny
    conditions:
    - field: input.command
      operator: matches
      value: 'password(?=\s*=)'
`

const freezeManifest = `apiVersion: toolgate.dev/v1alpha1
kind: FrozenAgent
metadata:
  name: freeze-demo-agent
spec:
  agentId: demo-agent
  reason: "incident INC-7: demo-agent is looping on deletes"
`

func req(tool, agent, command string) map[string]any {
	return map[string]any{"tool_name": tool, "agent_id": agent, "input": map[string]any{"command": command}}
}

type decision struct {
	Decision      string `json:"decision"`
	Code          string `json:"code"`
	MatchedPolicy string `json:"matchedPolicyId"`
	MatchedRule   string `json:"matchedRuleId"`
	Reason        string `json:"reason"`
}

func (d *demo) decide(r map[string]any) decision {
	body, _ := json.Marshal(r)
	resp, err := d.client.Post("http://sidecar/v1/evaluate", "application/json", bytes.NewReader(body))
	if err != nil {
		return decision{Decision: "error: " + err.Error()}
	}
	defer resp.Body.Close()
	var out decision
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return out
}

func (d *demo) show(r map[string]any) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(r)
	body := strings.TrimSpace(buf.String())
	got := d.decide(r)
	fmt.Fprintf(d.out, "$ curl -s --unix-socket %s -XPOST http://sidecar/v1/evaluate -d '%s'\n", d.socket, body)
	line := "    => " + strings.ToUpper(got.Decision)
	if got.Code != "" {
		line += " " + got.Code
	}
	if got.MatchedRule != "" {
		line += fmt.Sprintf("  (policy %s, rule %s)", got.MatchedPolicy, got.MatchedRule)
	}
	if got.Reason != "" {
		line += ": " + got.Reason
	}
	fmt.Fprintln(d.out, line)
}

// kubectlRun runs kubectl when the machine has it, else the Go client
// stand-in.
func (d *demo) kubectlRun(args ...string) (string, error) {
	if d.kubectl == "" {
		out, err := d.fallback.run(args...)
		if err != nil {
			return strings.TrimSpace(out + "\n" + err.Error()), err
		}
		return out, nil
	}
	cmd := exec.Command(d.kubectl, append([]string{"--kubeconfig", d.kubeconfig}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return strings.TrimSpace(filterSkew(out.String())), err
}

// filterSkew drops kubectl's version-skew warning: the machine's kubectl is
// older than the API server built here, which is fine for what the demo does.
func filterSkew(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.Contains(l, "version difference") && !strings.Contains(l, "WARNING: version") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

func indent(s string) string { return "    " + strings.ReplaceAll(s, "\n", "\n    ") }

func waitUntil(timeout time.Duration, ok func() bool) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if ok() {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("not within %v", timeout)
}

// unixClient asks over the socket at path.
func unixClient(path string) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}}}
}

// sidecarAddr is 127.0.0.1:8181, the sidecar's default, when it is free.
func sidecarAddr() (string, error) {
	for _, a := range []string{"127.0.0.1:8181", "127.0.0.1:0"} {
		l, err := net.Listen("tcp", a)
		if err == nil {
			addr := l.Addr().String()
			l.Close()
			return addr, nil
		}
	}
	return "", fmt.Errorf("no free port on 127.0.0.1")
}
