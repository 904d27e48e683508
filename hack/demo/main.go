// Command demo is `make demo`: it brings up toolgate on this machine (a real
// kube-apiserver and etcd, the operator with its webhooks, a sidecar), applies
// config/samples with the real kubectl, and tells the story of real decisions. It stops
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
	"slices"
	"strings"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/endpoint"
	"github.com/toolgate/toolgate/internal/localcluster"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/manifest"
)

func main() {
	keep := flag.Bool("keep", false, "keep everything running until Ctrl-C")
	flag.Parse()
	if err := run(os.Stdout, *keep); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

type demo struct {
	out        io.Writer
	kubectl    string // the kubectl found on PATH
	curl       string // the curl found on PATH
	kubeconfig string
	socket     string // the sidecar's Unix socket, which the demo asks
	client     *http.Client
}

// need is the named program on PATH, or an error saying how to get it: the
// demo runs the real kubectl and curl, as a user would.
func need(name string) (string, error) {
	path, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s is not on PATH: the demo runs the real %s, as you would.\n"+
			"Install it (Debian/Ubuntu: sudo apt-get install %s; others: your package manager) and run make demo again", name, name, name)
	}
	return path, nil
}

func run(out io.Writer, keep bool) error {
	kubectl, err := need("kubectl")
	if err != nil {
		return err
	}
	curl, err := need("curl")
	if err != nil {
		return err
	}
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
	addr, err := freeAddr(endpoint.DefaultAddress)
	if err != nil {
		return err
	}
	// An MCP server built with the official Go SDK (pay, read_file,
	// delete_file, ...), which the sidecar proxies as "files".
	mcpServer, err := localcluster.Build(dir, "./test/mcpserver", "mcp-files")
	if err != nil {
		return err
	}
	filesAddr, err := freeAddr("127.0.0.1:0")
	if err != nil {
		return err
	}
	if _, err := cluster.StartProcess("mcp-files", mcpServer, "-listen", filesAddr); err != nil {
		return err
	}
	mcpAddr, err := freeAddr("127.0.0.1:8182")
	if err != nil {
		return err
	}
	// The socket, as in an injected Pod, where agents should ask; the port
	// beside it for clients that cannot use one.
	sock := filepath.Join(dir, "toolgate.sock")
	if _, err := cluster.StartProcess("sidecar", bin, "sidecar", "--configmap", "demo/toolgate-bundle",
		"--kubeconfig", cluster.Kubeconfig, "--listen", endpoint.UnixURL(sock), "--listen", addr, "--decision-log", "stdout",
		"--mcp-listen", mcpAddr, "--mcp-upstream", "files=http://"+filesAddr+"/mcp-stateless",
		// As the injector sets it from the Pod spec: an ApprovalRequest names
		// the ServiceAccount whose call it holds.
		"--service-account", "demo-agent"); err != nil {
		return err
	}
	d := &demo{out: out, kubectl: kubectl, curl: curl, kubeconfig: cluster.Kubeconfig, socket: sock, client: unixClient(sock)}
	say("==> the operator (toolgate manager, with its webhooks) and a sidecar on %s and %s are running", sock, addr)
	say("==> the sidecar also proxies an MCP server (official Go SDK) at http://%s/mcp/files", mcpAddr)
	say("==> the kubectl commands below run %s in %s, with", kubectl, testenv.RepoRoot())
	say("$ export KUBECONFIG=%s", cluster.Kubeconfig)

	say("")
	if _, err := d.run("", "create", "namespace", "demo"); err != nil {
		return err
	}
	// Wait for the webhook to serve, so the first apply is validated.
	if err := waitUntil(30*time.Second, func() bool { return webhookServes(cluster.Client) == nil }); err != nil {
		return fmt.Errorf("the webhook never answered: %w: %v\n%s", err, webhookServes(cluster.Client), mgr.LogTail(2000))
	}
	say("")
	if _, err := d.run("", "apply", "-n", "demo", "-k", "config/samples/"); err != nil {
		return err
	}
	pay := map[string]any{"tool_name": "pay", "agent_id": "demo-agent", "kwargs": map[string]any{"amount": 5000}}
	smallPay := map[string]any{"tool_name": "pay", "agent_id": "demo-agent", "kwargs": map[string]any{"amount": 10}}
	if err := waitUntil(30*time.Second, func() bool {
		// kubectl applies one object at a time: wait for a bundle holding
		// them all. A small payment shows pay-cap is in; a large one would
		// ask, and leave an ApprovalRequest before the story tells of it. A
		// redacted result shows results-secrets is in.
		return d.decide(req("Bash", "demo-agent", "ls -la")).Decision == "allow" && d.decide(smallPay).MatchedRule == "pay-within-cap" &&
			d.redacts()
	}); err != nil {
		return fmt.Errorf("the sidecar never loaded the samples: %w", err)
	}

	say("\n--- 1. Read-only shell commands are allowed")
	if err := d.show(req("Bash", "demo-agent", "ls -la")); err != nil {
		return err
	}
	say("\n--- 2. rm -rf is denied, with the rule's reason")
	if err := d.show(req("Bash", "demo-agent", "ls build && rm -rf build")); err != nil {
		return err
	}
	say("\n--- 3. Payments above 1000 wait for a person: the call is held until someone approves it with kubectl")
	if err := d.askAndApprove(cluster.Client, "demo", pay); err != nil {
		return err
	}

	say("\n--- 4. A Policy with a regex RE2 cannot compile is rejected at apply time")
	if msg, err := d.run(badPolicy, "apply", "-n", "demo", "-f", "-"); err == nil {
		return fmt.Errorf("the bad regex was accepted:\n%s", msg)
	}

	say("\n--- 5. Freeze an agent: every call it makes is denied (AGENT_FROZEN)")
	start := time.Now()
	if _, err := d.run(freezeManifest, "apply", "-n", "demo", "-f", "-"); err != nil {
		return err
	}
	ls := req("Bash", "demo-agent", "ls -la")
	if err := waitUntil(10*time.Second, func() bool { return d.decide(ls).Code == "AGENT_FROZEN" }); err != nil {
		return fmt.Errorf("the freeze never reached the sidecar: %w", err)
	}
	say("    (the sidecar denied demo-agent %d ms after kubectl apply started)", time.Since(start).Milliseconds())
	if err := d.show(ls); err != nil {
		return err
	}

	say("\n--- 6. Unfreeze: allowed again")
	if _, err := d.run("", "delete", "-n", "demo", "frozenagent", "freeze-demo-agent"); err != nil {
		return err
	}
	if err := waitUntil(10*time.Second, func() bool { return d.decide(ls).Decision == "allow" }); err != nil {
		return fmt.Errorf("the unfreeze never reached the sidecar: %w", err)
	}
	if err := d.show(ls); err != nil {
		return err
	}

	say("\n--- 7. MCP tools, enforced: the agent reaches the files server only through the sidecar")
	if _, err := d.run(mcpPolicy, "apply", "-n", "demo", "-f", "-"); err != nil {
		return err
	}
	files := "http://" + mcpAddr + "/mcp/files"
	if err := waitUntil(30*time.Second, func() bool {
		names, err := mcpToolNames(files)
		return err == nil && !slices.Contains(names, "delete_file")
	}); err != nil {
		return fmt.Errorf("the proxy never hid delete_file: %w", err)
	}
	say("    tools/list: delete_file is hidden (the policy denies it whatever its arguments)")
	if err := d.mcp(files, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`); err != nil {
		return err
	}
	say("    read_file is allowed: the call reaches the server")
	if err := d.mcp(files, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"notes.txt"}}}`); err != nil {
		return err
	}
	say("    read_file under /secrets/ is denied on its argument: the server never sees it, the model reads why")
	if err := d.mcp(files, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/secrets/db-password"}}}`); err != nil {
		return err
	}
	say("    the server's own count: the one allowed call, nothing else")
	if _, _, err := d.curlShown("-s", "http://"+filesAddr+"/stats"); err != nil {
		return err
	}

	say("\n--- 8. An MCP server the agent starts itself (stdio): toolgate starts it instead, one line in the agent's configuration")
	stdioStats, err := freeAddr("127.0.0.1:0")
	if err != nil {
		return err
	}
	say("    (PATH=%s:$PATH; the agent writes each message on the guard's stdin)", dir)
	g, err := d.startStdio(bin, "mcp", "stdio", "--server", "files", "--url", endpoint.UnixURL(sock), "--",
		filepath.Base(mcpServer), "-stdio", "-listen", stdioStats)
	if err != nil {
		return err
	}
	for _, m := range []struct {
		msg string
		id  int
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"demo-agent","version":"1.0"}}}`, 1},
		{`{"jsonrpc":"2.0","method":"notifications/initialized"}`, 0},
		{`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"notes.txt"}}}`, 2},
		{`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/secrets/db-password"}}}`, 3},
	} {
		if err := g.send(m.msg, m.id); err != nil {
			_ = g.stop()
			return err
		}
	}
	say("    the stdio server's own count: the one allowed call")
	if _, _, err := d.curlShown("-s", "http://"+stdioStats+"/stats"); err != nil {
		_ = g.stop()
		return err
	}
	if err := g.stop(); err != nil {
		return err
	}

	say("\n--- 9. What tools return is judged too: a key in a result is redacted before the agent reads it, and a bulk result is withheld")
	if err := d.showResult(envResult); err != nil {
		return err
	}
	if err := d.showResult(bulkResult); err != nil {
		return err
	}

	say("")
	if _, err := d.run("", "get", "policies,frozenagents,approvalrequests", "-n", "demo"); err != nil {
		return err
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

// webhookServes dry-runs the creation of a sample Policy: it succeeds once
// the API server can call the manager's validating webhook.
func webhookServes(c client.Client) error {
	set, err := manifest.Load([]string{filepath.Join(testenv.RepoRoot(), "config/samples/policy_pay_cap.yaml")}, nil)
	if err != nil {
		return err
	}
	p := set.PolicyObjects()[0]
	p.Namespace = "demo"
	return c.Create(context.Background(), &p, client.DryRunAll)
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
	Effect        string `json:"effect"`
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

// show prints the curl command a user would type, runs exactly that with
// the curl on PATH, prints curl's answer, and sums it up in one line.
func (d *demo) show(r map[string]any) error {
	line, out, err := d.curlShown("-s", "--unix-socket", d.socket, "-XPOST", "http://sidecar/v1/evaluate", "-d", compactJSON(r))
	if err != nil {
		return err
	}
	return d.summarize(line, out)
}

// summarize prints the demo's one-line summary of the sidecar's answer out
// to the curl command line.
func (d *demo) summarize(line string, out []byte) error {
	var got decision
	if err := json.Unmarshal(out, &got); err != nil {
		return fmt.Errorf("%s: the sidecar's answer is not a decision: %w", line, err)
	}
	summary := "    => " + strings.ToUpper(got.Decision)
	if got.Code != "" && got.Code != got.MatchedRule {
		// A rule's deny is coded by the rule's id, named just after.
		summary += " " + got.Code
	}
	if got.MatchedRule != "" {
		summary += fmt.Sprintf("  (policy %s, rule %s)", got.MatchedPolicy, got.MatchedRule)
	}
	if got.Reason != "" {
		summary += ": " + got.Reason
	}
	fmt.Fprintln(d.out, summary)
	return nil
}

// curlShown prints the curl command a user would type, runs exactly that
// with the curl on PATH, and prints curl's answer, indented; it returns the
// line printed (for errors) and the answer.
func (d *demo) curlShown(args ...string) (string, []byte, error) {
	line := "$ curl " + shellJoin(args)
	fmt.Fprintln(d.out, line)
	out, err := exec.Command(d.curl, args...).Output()
	if err != nil {
		return line, nil, fmt.Errorf("%s: %w", line, err)
	}
	fmt.Fprintln(d.out, indent(strings.TrimSpace(string(out))))
	return line, out, nil
}

// run prints the command line a user would type, runs exactly that with the
// kubectl found on PATH (from the repository's top directory, KUBECONFIG set
// to the local control plane, stdin given as a heredoc), and prints what
// kubectl wrote to stdout and stderr, indented. It returns that output.
func (d *demo) run(stdin string, args ...string) (string, error) {
	line := "$ kubectl " + shellJoin(args)
	if stdin != "" {
		line += " <<'YAML'\n" + stdin + "YAML"
	}
	fmt.Fprintln(d.out, line)
	cmd := exec.Command(d.kubectl, args...)
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "KUBECONFIG="+d.kubeconfig)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	got := strings.TrimRight(out.String(), "\n")
	if got != "" {
		fmt.Fprintln(d.out, indent(got))
	}
	if err != nil {
		err = fmt.Errorf("%s: %w\n%s", line, err, got)
	}
	return got, err
}

// shellJoin quotes, for a POSIX shell, the arguments that need it.
func shellJoin(args []string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		quoted[i] = a
		if a == "" || strings.ContainsFunc(a, func(r rune) bool {
			return !strings.ContainsRune("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_=,./:@%+", r)
		}) {
			quoted[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(quoted, " ")
}

func indent(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = "    " + l
		}
	}
	return strings.Join(lines, "\n")
}

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

// freeAddr is want (a default port of the sidecar's) when it is free, or
// a free port on 127.0.0.1.
func freeAddr(want string) (string, error) {
	for _, a := range []string{want, "127.0.0.1:0"} {
		l, err := net.Listen("tcp", a)
		if err == nil {
			addr := l.Addr().String()
			l.Close()
			return addr, nil
		}
	}
	return "", fmt.Errorf("no free port on 127.0.0.1")
}
