// Command approvallatency measures approval-to-forward: from a person's
// status write that approves an ApprovalRequest until the MCP call it held
// returns to the client, forwarded and answered by the upstream.
// Everything is real: envtest's kube-apiserver and etcd, the toolgate
// binary as manager and as sidecar (its MCP proxy in front of
// test/mcpserver, an MCP server on the official Go SDK), and an MCP client
// on that SDK. Run: make measure-approvals.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/internal/localcluster"
	"github.com/toolgate/toolgate/internal/mcptest"
	"github.com/toolgate/toolgate/internal/testenv"
)

const ns = "payments"

func main() {
	n := flag.Int("n", 50, "approvals to measure")
	target := flag.Duration("target-p99", time.Second, "exit 1 when p99 is above this")
	pause := flag.Duration("pause", 0, "wait this long between runs (0: back to back, each call asked as soon as the last returned)")
	flag.Parse()
	crlog.SetLogger(logr.Discard()) // the clients' own logs: nothing here to read
	if err := run(*n, *target, *pause); err != nil {
		fmt.Fprintln(os.Stderr, "approvallatency:", err)
		os.Exit(1)
	}
}

func run(n int, target, pause time.Duration) error {
	if n < 1 {
		return fmt.Errorf("-n %d: measure at least one approval", n)
	}
	dir, err := os.MkdirTemp("", "toolgate-approvallatency")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := localcluster.BuildToolgate(dir)
	if err != nil {
		return err
	}
	cluster, err := localcluster.Start(dir)
	if err != nil {
		return err
	}
	defer cluster.Stop()
	ctx := context.Background()
	if err := cluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	up, err := startUpstream()
	if err != nil {
		return err
	}
	defer up.stop()
	if _, err := cluster.StartProcess("manager", bin, cluster.ManagerArgs()...); err != nil {
		return err
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	mcpAddr, err := freeAddr()
	if err != nil {
		return err
	}
	sidecar, err := cluster.StartProcess("sidecar", bin, "sidecar", "--configmap", ns+"/toolgate-bundle",
		"--kubeconfig", cluster.Kubeconfig, "--listen", addr, "--decision-log", "none",
		"--agent-id", "pay-bot", "--service-account", "pay-agent",
		"--mcp-upstream", "pay="+up.url+"/mcp", "--mcp-listen", mcpAddr)
	if err != nil {
		return err
	}
	if err := createPolicy(ctx, cluster.Client); err != nil {
		return err
	}
	if err := waitServed(addr, 60*time.Second); err != nil {
		return fmt.Errorf("%w\nsidecar log:\n%s", err, sidecar.LogTail(2000))
	}

	admin, err := whoAmI(ctx, cluster.Client)
	if err != nil {
		return err
	}
	wc, err := client.NewWithWatch(cluster.Config, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		return err
	}
	requests, err := watchRequests(ctx, wc)
	if err != nil {
		return err
	}
	defer requests.Stop()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "approvallatency", Version: "1.0.0"}, nil).
		Connect(ctx, &mcp.StreamableClientTransport{Endpoint: "http://" + mcpAddr + "/mcp/pay", MaxRetries: -1}, nil)
	if err != nil {
		return fmt.Errorf("connecting through the proxy: %w", err)
	}
	defer func() { _ = cs.Close() }()

	var toClient, toUpstream []time.Duration
	for i := range n {
		amount := 5000 + i // over the rule's 1000: asked
		held := callAsync(cs, amount)
		ar, err := nextRequest(requests.ResultChan(), 30*time.Second)
		if err != nil {
			return fmt.Errorf("run %d: %w\nsidecar log:\n%s", i, err, sidecar.LogTail(2000))
		}
		select {
		case o := <-held:
			return fmt.Errorf("run %d: the call returned before its approval: %+v %v", i, o.res, o.err)
		default:
		}
		t0 := time.Now() // just before the approval is written
		if err := approve(ctx, cluster.Client, ar, admin); err != nil {
			return fmt.Errorf("run %d: approving %s: %w", i, ar.Name, err)
		}
		var o outcome
		select {
		case o = <-held:
		case <-time.After(30 * time.Second):
			return fmt.Errorf("run %d: the approved call had no answer after 30s\nsidecar log:\n%s", i, sidecar.LogTail(2000))
		}
		back := o.at.Sub(t0)
		if o.err != nil {
			return fmt.Errorf("run %d: the approved call failed: %w", i, o.err)
		}
		if want := fmt.Sprintf("paid %d", amount); o.res.IsError || text(o.res) != want {
			return fmt.Errorf("run %d: the approved call answered %q (isError %v), want %q", i, text(o.res), o.res.IsError, want)
		}
		arrived, err := up.arrival("pay", 5*time.Second)
		if err != nil {
			return fmt.Errorf("run %d: %w", i, err)
		}
		toClient = append(toClient, back)
		toUpstream = append(toUpstream, arrived.Sub(t0))
		time.Sleep(pause)
	}
	calls, err := up.calls("pay")
	if err != nil {
		return err
	}
	if calls != n {
		return fmt.Errorf("the upstream saw %d pay calls, want exactly %d: one per approval", calls, n)
	}

	slices.Sort(toClient)
	slices.Sort(toUpstream)
	fmt.Printf("approval-to-forward over %d approvals, %v apart (MCP proxy, sidecar --configmap, real manager, envtest; the upstream saw %d calls):\n", n, pause, calls)
	fmt.Printf("  status write -> held call answered at the client:  %s\n", quantiles(toClient))
	fmt.Printf("  status write -> the upstream's tool handler:        %s\n", quantiles(toUpstream))
	if p99 := quantile(toClient, 0.99); p99 > target {
		return fmt.Errorf("p99 %v is above the target %v", p99, target)
	}
	return nil
}

// createPolicy writes the Policy that asks for a pay over 1000 and allows
// the rest, retrying until the manager's webhook serves.
func createPolicy(ctx context.Context, c client.Client) error {
	num := func(n int) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(strconv.Itoa(n))} }
	pay := &apiextensionsv1.JSON{Raw: []byte(`"pay"`)}
	isPay := v1alpha1.Condition{Field: "tool_name", Operator: "eq", Value: pay}
	pol := &v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payments"},
		Spec: v1alpha1.PolicySpec{Rules: []v1alpha1.Rule{
			{ID: "pay-cap", Effect: v1alpha1.RuleAsk, Description: "payments over 1000 need a person",
				Approval:   &v1alpha1.RuleApproval{Timeout: "2m"},
				Conditions: []v1alpha1.Condition{isPay, {Field: "input.amount", Operator: "gt", Value: num(1000)}}},
			{ID: "pay", Effect: v1alpha1.RuleAllow, Conditions: []v1alpha1.Condition{isPay}},
		}}}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := c.Create(ctx, pol.DeepCopy())
		if err == nil || !strings.Contains(err.Error(), "failed calling webhook") || time.Now().After(deadline) {
			return err
		}
		time.Sleep(200 * time.Millisecond) // polling a condition: the manager's webhook serving
	}
}

// waitServed polls /v1/evaluate until a small payment is allowed by the
// Policy's own allow rule: the bundle holding it is served. Only the
// warm-up polls; the measured path waits on a watch and on the call.
func waitServed(addr string, timeout time.Duration) error {
	body := `{"tool_name":"pay","input":{"amount":10}}`
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		resp, err := http.Post("http://"+addr+"/v1/evaluate", "application/json", strings.NewReader(body))
		if err == nil {
			var r struct {
				Decision    string `json:"decision"`
				MatchedRule string `json:"matchedRuleId"`
			}
			_ = json.NewDecoder(resp.Body).Decode(&r)
			_ = resp.Body.Close()
			if r.Decision == "allow" && r.MatchedRule == "pay" {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("the sidecar never served the payments Policy within %v", timeout)
}

// watchRequests watches the namespace's ApprovalRequests from now on.
func watchRequests(ctx context.Context, c client.WithWatch) (watch.Interface, error) {
	var list v1alpha1.ApprovalRequestList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	if len(list.Items) != 0 {
		return nil, fmt.Errorf("%d ApprovalRequests exist before the first call", len(list.Items))
	}
	return c.Watch(ctx, &v1alpha1.ApprovalRequestList{}, client.InNamespace(ns),
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
}

// nextRequest is the next ApprovalRequest created. Every call asks with
// another amount, so each run has a request of its own.
func nextRequest(events <-chan watch.Event, timeout time.Duration) (*v1alpha1.ApprovalRequest, error) {
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				return nil, errors.New("the ApprovalRequest watch ended")
			}
			if ar, isAR := ev.Object.(*v1alpha1.ApprovalRequest); isAR && ev.Type == watch.Added {
				return ar, nil
			}
		case <-deadline:
			return nil, fmt.Errorf("no ApprovalRequest created within %v", timeout)
		}
	}
}

// whoAmI is the user name the API server knows c by, which a decision's
// decidedBy must be (the admission policy shipped with toolgate checks it).
func whoAmI(ctx context.Context, c client.Client) (string, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return "", fmt.Errorf("asking the API server who the admin is (SelfSubjectReview): %w", err)
	}
	if review.Status.UserInfo.Username == "" {
		return "", errors.New("the API server knows the admin by no user name: a decision must say who made it")
	}
	return review.Status.UserInfo.Username, nil
}

// approve is the status write a person makes (kubectl patch
// --subresource=status --type=merge), as the admin.
func approve(ctx context.Context, c client.Client, ar *v1alpha1.ApprovalRequest, user string) error {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{
		"decision": v1alpha1.ApprovalApproved, "decidedBy": user, "decidedAt": metav1.Now(), "message": "measured"}})
	if err != nil {
		return err
	}
	return c.Status().Patch(ctx, ar, client.RawPatch(types.MergePatchType, patch))
}

type outcome struct {
	res *mcp.CallToolResult
	err error
	at  time.Time // when the answer reached the client
}

func callAsync(cs *mcp.ClientSession, amount int) <-chan outcome {
	out := make(chan outcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "pay", Arguments: map[string]any{"amount": amount}})
		out <- outcome{res, err, time.Now()}
	}()
	return out
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// upstream is test/mcpserver run with -announce: it says on stdout when
// each call reaches its tool handler, which is when the upstream received
// it (same machine, same clock).
type upstream struct {
	url     string
	cmd     *exec.Cmd
	arrived chan announced
}

type announced struct {
	tool string
	at   time.Time
}

func startUpstream() (*upstream, error) {
	bin, err := mcptest.ServerBinary()
	if err != nil {
		return nil, err
	}
	u := &upstream{cmd: exec.Command(bin, "-listen", "127.0.0.1:0", "-announce"), arrived: make(chan announced, 64)}
	out, err := u.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	u.cmd.Stderr = os.Stderr
	if err := u.cmd.Start(); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		u.stop()
		return nil, errors.New("the MCP server said nothing")
	}
	addr, ok := strings.CutPrefix(sc.Text(), "listening on ")
	if !ok {
		u.stop()
		return nil, fmt.Errorf("the MCP server said %q", sc.Text())
	}
	u.url = "http://" + addr
	go u.read(sc)
	return u, nil
}

func (u *upstream) read(sc *bufio.Scanner) {
	defer close(u.arrived)
	for sc.Scan() {
		var tool string
		var nanos int64
		if _, err := fmt.Sscanf(sc.Text(), "called %s %d", &tool, &nanos); err == nil {
			u.arrived <- announced{tool, time.Unix(0, nanos)}
		}
	}
}

// arrival is when the next call of tool reached the upstream.
func (u *upstream) arrival(tool string, timeout time.Duration) (time.Time, error) {
	deadline := time.After(timeout)
	for {
		select {
		case a, ok := <-u.arrived:
			if !ok {
				return time.Time{}, errors.New("the MCP server's output ended")
			}
			if a.tool == tool {
				return a.at, nil
			}
		case <-deadline:
			return time.Time{}, fmt.Errorf("the MCP server announced no %s call within %v", tool, timeout)
		}
	}
}

// calls is how many calls of tool reached the upstream (GET /stats).
func (u *upstream) calls(tool string) (int, error) {
	resp, err := http.Get(u.url + "/stats")
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	var st struct {
		Calls map[string]int `json:"calls"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&st); err != nil {
		return 0, fmt.Errorf("the MCP server's /stats: %w", err)
	}
	return st.Calls[tool], nil
}

func (u *upstream) stop() {
	_ = u.cmd.Process.Kill()
	_ = u.cmd.Wait()
}

func quantile(sorted []time.Duration, p float64) time.Duration {
	return sorted[min(len(sorted)-1, int(p*float64(len(sorted))))]
}

// quantiles sums up lat, sorted.
func quantiles(lat []time.Duration) string {
	r := func(d time.Duration) time.Duration { return d.Round(100 * time.Microsecond) }
	return fmt.Sprintf("p50 %v  p99 %v  max %v", r(quantile(lat, 0.50)), r(quantile(lat, 0.99)), r(lat[len(lat)-1]))
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
