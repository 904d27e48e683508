package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/internal/localcluster"
	"github.com/toolgate/toolgate/internal/mcptest"
	"github.com/toolgate/toolgate/internal/testenv"
)

// approvalRig is a real manager, a real sidecar (decisions and MCP proxy)
// and a real MCP server (test/mcpserver, the official Go SDK) on a local
// control plane, with a pay-cap Policy that asks above 1000.
type approvalRig struct {
	t        *testing.T
	ns       string
	bin      string
	cluster  *localcluster.Cluster
	addr     string // /v1/evaluate
	proxy    string // the MCP proxy's endpoint for server "pay"
	upstream string // the MCP server's base URL (GET /stats)
	revision string // the bundle the operator published for the Policy
}

func startApprovalRig(t *testing.T) *approvalRig {
	const ns = "payments"
	dir := t.TempDir()
	bin, cluster := startCluster(t, dir)
	r := &approvalRig{t: t, ns: ns, bin: bin, cluster: cluster}
	ctx := context.Background()
	if err := cluster.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	r.upstream = startMCPUpstream(t)
	if _, err := cluster.StartProcess("manager", bin, cluster.ManagerArgs()...); err != nil {
		t.Fatal(err)
	}
	r.addr = testenv.FreeLoopbackAddr(t)
	mcpAddr := testenv.FreeLoopbackAddr(t)
	r.proxy = "http://" + mcpAddr + "/mcp/pay"
	if _, err := cluster.StartProcess("sidecar", bin, "sidecar", "--configmap", ns+"/toolgate-bundle",
		"--kubeconfig", cluster.Kubeconfig, "--listen", r.addr, "--decision-log", "stdout",
		"--agent-id", "pay-bot", "--service-account", "pay-agent",
		"--mcp-upstream", "pay="+r.upstream+"/mcp", "--mcp-listen", mcpAddr); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, name := range []string{"manager", "sidecar"} {
				if b, err := os.ReadFile(dir + "/" + name + ".log"); err == nil {
					t.Logf("%s log (tail):\n%s", name, tail(string(b), 4000))
				}
			}
		}
	})
	num := func(n int) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(fmt.Sprint(n))} }
	str := func(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(`"` + s + `"`)} }
	pol := &v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "payments"},
		Spec: v1alpha1.PolicySpec{Rules: []v1alpha1.Rule{
			{ID: "pay-cap", Effect: v1alpha1.RuleAsk, Description: "payments over 1000 need a person",
				Approval:   &v1alpha1.RuleApproval{Timeout: "2m"},
				Conditions: []v1alpha1.Condition{{Field: "tool_name", Operator: "eq", Value: str("pay")}, {Field: "input.amount", Operator: "gt", Value: num(1000)}}},
			{ID: "delete-asks-briefly", Effect: v1alpha1.RuleAsk, Approval: &v1alpha1.RuleApproval{Timeout: "3s"},
				Conditions: []v1alpha1.Condition{{Field: "tool_name", Operator: "eq", Value: str("delete_file")}}},
		}}}
	// The manager's webhook may not serve yet: retry until it does.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		err := cluster.Client.Create(ctx, pol.DeepCopy())
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "failed calling webhook") || time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond) // polling a condition: the manager's webhook serving
	}
	r.revision = answersEventually(t, r.addr, map[string]any{"tool_name": "pay", "input": map[string]any{"amount": 10}}, "the bundle served", is("allow", "", "")).BundleRevision
	r.installApprovalGuards()
	return r
}

func startMCPUpstream(t *testing.T) string {
	t.Helper()
	bin, err := mcptest.ServerBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-listen", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(out)
	if !sc.Scan() {
		t.Fatal("the MCP server said nothing")
	}
	addr, ok := strings.CutPrefix(sc.Text(), "listening on ")
	if !ok {
		t.Fatalf("the MCP server said %q", sc.Text())
	}
	go func() {
		for sc.Scan() {
		}
	}()
	return "http://" + addr
}

// calls is how many calls of tool reached the MCP server.
func (r *approvalRig) calls(tool string) int {
	r.t.Helper()
	resp, err := http.Get(r.upstream + "/stats")
	if err != nil {
		r.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var st struct {
		Calls map[string]int `json:"calls"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		r.t.Fatal(err)
	}
	return st.Calls[tool]
}

func (r *approvalRig) connect(opts *mcp.ClientOptions) *mcp.ClientSession {
	r.t.Helper()
	return r.connectWith(opts, nil)
}

// connectVia connects with hc, whose connections the test controls.
func (r *approvalRig) connectVia(hc *http.Client) *mcp.ClientSession {
	r.t.Helper()
	return r.connectWith(nil, hc)
}

func (r *approvalRig) connectWith(opts *mcp.ClientOptions, hc *http.Client) *mcp.ClientSession {
	r.t.Helper()
	c := mcp.NewClient(&mcp.Implementation{Name: "approvals-e2e", Version: "1.0.0"}, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.proxy, MaxRetries: -1, HTTPClient: hc}, nil)
	if err != nil {
		r.t.Fatalf("connecting through the proxy: %v", err)
	}
	r.t.Cleanup(func() { _ = cs.Close() })
	return cs
}

type callOutcome struct {
	res *mcp.CallToolResult
	err error
}

// callAsync calls a tool through the proxy without waiting for it.
func callAsync(cs *mcp.ClientSession, tool string, args map[string]any) <-chan callOutcome {
	out := make(chan callOutcome, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		out <- callOutcome{res, err}
	}()
	return out
}

// pending waits for an ApprovalRequest not in seen to appear and returns it.
func (r *approvalRig) pending(seen map[string]bool) v1alpha1.ApprovalRequest {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var list v1alpha1.ApprovalRequestList
		if err := r.cluster.Client.List(context.Background(), &list, client.InNamespace(r.ns)); err != nil {
			r.t.Fatal(err)
		}
		for _, ar := range list.Items {
			if !seen[ar.Name] {
				seen[ar.Name] = true
				return ar
			}
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("no new ApprovalRequest in %s after 30s (seen %v)", r.ns, seen)
		}
		time.Sleep(50 * time.Millisecond) // polling a condition: the sidecar's create
	}
}

// requests names the ApprovalRequests of the rig's namespace.
func (r *approvalRig) requests() []string {
	r.t.Helper()
	var list v1alpha1.ApprovalRequestList
	if err := r.cluster.Client.List(context.Background(), &list, client.InNamespace(r.ns)); err != nil {
		r.t.Fatal(err)
	}
	var names []string
	for _, ar := range list.Items {
		names = append(names, ar.Name)
	}
	return names
}

func outcome(t *testing.T, ch <-chan callOutcome, within time.Duration) *mcp.CallToolResult {
	t.Helper()
	select {
	case o := <-ch:
		if o.err != nil {
			t.Fatalf("the call failed: %v", o.err)
		}
		return o.res
	case <-time.After(within):
		t.Fatalf("the call had no answer after %v", within)
	}
	return nil
}

func stillHeld(t *testing.T, ch <-chan callOutcome) {
	t.Helper()
	select {
	case o := <-ch:
		t.Fatalf("the call was answered while its approval was pending: %+v %v", o.res, o.err)
	case <-time.After(500 * time.Millisecond): // a held call stays held
	}
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

// TestApprovalsEndToEnd (issue 27), real processes on a real API server:
// an MCP call to pay over 1000 is held (the upstream never sees it) until
// an admin approves its ApprovalRequest; the upstream then receives
// exactly that call once; the same call again asks again; a changed
// amount asks again with another request; a denial answers isError with
// the approver's message; a rule's timeout denies APPROVAL_TIMEOUT; a
// freeze while waiting denies at once.
func TestApprovalsEndToEnd(t *testing.T) {
	r := startApprovalRig(t)
	progress := make(chan string, 16)
	cs := r.connect(&mcp.ClientOptions{ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		select {
		case progress <- req.Params.Message:
		default:
		}
	}})
	seen := map[string]bool{}

	if res := outcome(t, callAsync(cs, "pay", map[string]any{"amount": 10}), 30*time.Second); res.IsError {
		t.Fatalf("a payment of 10 was refused: %s", text(res))
	}
	before := r.calls("pay")

	held := make(chan callOutcome, 1)
	go func() {
		params := &mcp.CallToolParams{Name: "pay", Arguments: map[string]any{"amount": 5000}}
		params.SetProgressToken("pay-5000")
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		res, err := cs.CallTool(ctx, params)
		held <- callOutcome{res, err}
	}()
	ar := r.pending(seen)
	if ar.Spec.Tool != "pay" || ar.Spec.Rule != "pay-cap" || ar.Spec.Policy != "payments" || ar.Spec.AgentID != "pay-bot" ||
		ar.Spec.ServiceAccount != "pay-agent" || !strings.Contains(ar.Spec.Preview, "5000") || ar.Spec.Reason != "payments over 1000 need a person" {
		t.Fatalf("ApprovalRequest spec %+v", ar.Spec)
	}
	if left := time.Until(ar.Spec.ExpiresAt.Time); left < time.Minute || left > 2*time.Minute+5*time.Second {
		t.Fatalf("expires in %v, want about the rule's 2m", left)
	}
	stillHeld(t, held)
	// The client asked for progress: its session's stream says it waits.
	select {
	case msg := <-progress:
		if !strings.Contains(msg, "approve") {
			t.Errorf("progress message %q", msg)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no progress notification while the call was held")
	}
	if got := r.calls("pay"); got != before {
		t.Fatalf("the upstream saw %d pay calls while the call was held, want %d", got, before)
	}
	// Neither the agent's own ServiceAccount nor a namespace editor may
	// approve; the namespace's admin may, with toolgate approve.
	r.waitForGuards(ar.Name)
	agent := r.kubeconfigAs("system:serviceaccount:"+r.ns+":pay-agent", "system:serviceaccounts", "system:serviceaccounts:"+r.ns, "system:authenticated")
	if code, out := r.toolgateAs(agent, "approve", ar.Name, "-m", "I approve myself"); code != 1 || !strings.Contains(out, "ServiceAccount") {
		t.Fatalf("the agent's ServiceAccount approving its own call: exit %d, %s; want refused naming the ServiceAccount", code, out)
	}
	bob := r.kubeconfigAs("bob", "system:authenticated")
	if code, out := r.toolgateAs(bob, "approve", ar.Name); code != 1 || !strings.Contains(out, "forbidden") {
		t.Fatalf("an edit user approving: exit %d, %s; want forbidden", code, out)
	}
	stillHeld(t, held)
	alice := r.kubeconfigAs("alice", "system:authenticated")
	if code, out := r.toolgateAs(alice, "approve", ar.Name, "-m", "ok for the quarterly invoice"); code != 0 {
		t.Fatalf("the namespace admin approving: exit %d, %s", code, out)
	}
	if res := outcome(t, held, 10*time.Second); res.IsError {
		t.Fatalf("the approved call was refused: %s", text(res))
	}
	if got := r.calls("pay"); got != before+1 {
		t.Fatalf("the upstream saw %d pay calls, want exactly one more than %d", got, before)
	}
	var used v1alpha1.ApprovalRequest
	if err := r.cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: r.ns, Name: ar.Name}, &used); err != nil || used.Status.ConsumedAt == nil {
		t.Fatalf("the approval was not marked used: %+v %v", used.Status, err)
	}

	// The same call again asks again: an approval lets one call through.
	again := callAsync(cs, "pay", map[string]any{"amount": 5000})
	second := r.pending(seen)
	if second.Spec.ArgumentsDigest != ar.Spec.ArgumentsDigest {
		t.Fatalf("the same call has another digest: %s, %s", second.Spec.ArgumentsDigest, ar.Spec.ArgumentsDigest)
	}
	stillHeld(t, again)
	// A changed amount is another call, with a request of its own.
	changed := callAsync(cs, "pay", map[string]any{"amount": 5001})
	third := r.pending(seen)
	if third.Spec.ArgumentsDigest == ar.Spec.ArgumentsDigest || !strings.Contains(third.Spec.Preview, "5001") {
		t.Fatalf("a changed amount did not ask with its own request: %+v", third.Spec)
	}
	if code, out := r.toolgateAs(alice, "approve", ar.Name); code != 1 {
		t.Fatalf("approving a used approval again: exit %d, %s; want refused", code, out)
	}
	if code, out := r.toolgateAs(alice, "deny", second.Name, "-m", "not this month"); code != 0 {
		t.Fatalf("the namespace admin denying: exit %d, %s", code, out)
	}
	res := outcome(t, again, 10*time.Second)
	if !res.IsError || !strings.Contains(text(res), "APPROVAL_DENIED") || !strings.Contains(text(res), "not this month") {
		t.Fatalf("a denied call answered %q (isError %v), want APPROVAL_DENIED with the approver's message", text(res), res.IsError)
	}

	// A freeze while waiting denies at once.
	start := time.Now()
	if err := r.cluster.Client.Create(context.Background(), &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "stop-pay-bot"},
		Spec: v1alpha1.FrozenAgentSpec{AgentID: "pay-bot", Reason: "incident 42"}}); err != nil {
		t.Fatal(err)
	}
	res = outcome(t, changed, 10*time.Second)
	if !res.IsError || !strings.Contains(text(res), "AGENT_FROZEN") {
		t.Fatalf("a held call of a frozen agent answered %q, want AGENT_FROZEN", text(res))
	}
	t.Logf("a freeze ended a held call in %v", time.Since(start))
	if got := r.calls("pay"); got != before+1 {
		t.Fatalf("the upstream saw %d pay calls, want %d: no denied or held call reaches it", got, before+1)
	}
	// The operator's bundle with the freeze lands after the watch's: wait
	// for it, so that it cannot land after the freeze is lifted (and
	// freeze again until the operator publishes once more).
	small := map[string]any{"tool_name": "pay", "input": map[string]any{"amount": 10}}
	answersEventually(t, r.addr, small, "the operator's bundle with the freeze", func(d decision) bool {
		return d.Code == "AGENT_FROZEN" && d.BundleRevision != r.revision
	})
	if err := r.cluster.Client.Delete(context.Background(), &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "stop-pay-bot"}}); err != nil {
		t.Fatal(err)
	}
	answersEventually(t, r.addr, small, "the operator's bundle without the freeze", func(d decision) bool {
		return d.Decision == "allow" && d.BundleRevision == r.revision
	})

	// The rule's timeout (3s) denies a call no one decides.
	start = time.Now()
	res = outcome(t, callAsync(cs, "delete_file", map[string]any{"path": "/tmp/x"}), 30*time.Second)
	if !res.IsError || !strings.Contains(text(res), "APPROVAL_TIMEOUT") {
		t.Fatalf("an undecided call answered %q, want APPROVAL_TIMEOUT", text(res))
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Fatalf("the timeout came after %v, before the rule's 3s", took)
	}
	if r.calls("delete_file") != 0 {
		t.Fatal("a call that timed out reached the upstream")
	}
}

// askAnswer is /v1/evaluate's answer with the approval it names.
type askAnswer struct {
	decision
	Approval *struct {
		Name      string    `json:"name"`
		Namespace string    `json:"namespace"`
		ExpiresAt time.Time `json:"expiresAt"`
	} `json:"approval"`
	status int
	body   string
}

func (r *approvalRig) ask(req map[string]any) askAnswer {
	r.t.Helper()
	body, _ := json.Marshal(req)
	hc := &http.Client{Timeout: 2 * time.Minute}
	resp, err := hc.Post("http://"+r.addr+"/v1/evaluate", "application/json", strings.NewReader(string(body)))
	if err != nil {
		r.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	var b strings.Builder
	if _, err := bufio.NewReader(resp.Body).WriteTo(&b); err != nil {
		r.t.Fatal(err)
	}
	a := askAnswer{status: resp.StatusCode, body: b.String()}
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal([]byte(a.body), &a); err != nil {
			r.t.Fatalf("%s: %v", a.body, err)
		}
	}
	return a
}

func payReq(amount int, extra ...string) map[string]any {
	req := map[string]any{"tool_name": "pay", "input": map[string]any{"amount": amount}}
	for i := 0; i+1 < len(extra); i += 2 {
		req[extra[i]] = extra[i+1]
	}
	return req
}

// TestApprovalsOverEvaluate (issue 27): /v1/evaluate answers an asked call
// at once with the ApprovalRequest it waits on (reused by an identical
// call), decides a later identical call against it (ask while pending,
// allow once approved, deny once used or for another call), holds the
// answer with "wait" until an admin approves, and refuses malformed fields.
func TestApprovalsOverEvaluate(t *testing.T) {
	r := startApprovalRig(t)
	first := r.ask(payReq(5000))
	if first.Decision != "ask" || first.Code != "APPROVAL_REQUIRED" || first.Effect != "ask" || first.MatchedRuleID != "pay-cap" || first.Approval == nil ||
		first.Approval.Namespace != r.ns || time.Until(first.Approval.ExpiresAt) > 2*time.Minute+5*time.Second || time.Until(first.Approval.ExpiresAt) < time.Minute {
		t.Fatalf("first answer %s", first.body)
	}
	name := first.Approval.Name
	if again := r.ask(payReq(5000)); again.Decision != "ask" || again.Approval == nil || again.Approval.Name != name {
		t.Fatalf("an identical call did not reuse %s: %s", name, again.body)
	}
	if named := r.ask(payReq(5000, "approval", name)); named.Decision != "ask" || named.Approval == nil || named.Approval.Name != name {
		t.Fatalf("naming the pending approval: %s, want ask with it", named.body)
	}
	if other := r.ask(payReq(4999, "approval", name)); other.Decision != "deny" || other.Code != "APPROVAL_INVALID" {
		t.Fatalf("another call naming the approval: %s, want deny APPROVAL_INVALID", other.body)
	}
	var list v1alpha1.ApprovalRequestList
	if err := r.cluster.Client.List(context.Background(), &list, client.InNamespace(r.ns)); err != nil || len(list.Items) != 1 {
		t.Fatalf("%d ApprovalRequests (%v), want the one: identical calls share it", len(list.Items), err)
	}

	// A wait holds the answer until the admin approves; the call is then
	// allowed once.
	r.waitForGuards(name)
	held := make(chan askAnswer, 1)
	go func() { held <- r.ask(payReq(5000, "wait", "60s")) }()
	time.Sleep(300 * time.Millisecond) // the request reaches the sidecar and waits
	select {
	case a := <-held:
		t.Fatalf("answered while pending: %s", a.body)
	default:
	}
	alice := r.kubeconfigAs("alice", "system:authenticated")
	if code, out := r.toolgateAs(alice, "approve", name, "-m", "fine"); code != 0 {
		t.Fatalf("approve: exit %d: %s", code, out)
	}
	var a askAnswer
	select {
	case a = <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("the waiting call had no answer 20s after its approval")
	}
	if a.Decision != "allow" || a.Effect != "ask" || !strings.Contains(a.Reason, "approved by alice: fine") || a.Approval == nil || a.Approval.Name != name {
		t.Fatalf("after approval: %s, want allow approved by alice", a.body)
	}
	if used := r.ask(payReq(5000, "approval", name)); used.Decision != "deny" || used.Code != "APPROVAL_INVALID" || !strings.Contains(used.Reason, "used already") {
		t.Fatalf("the used approval again: %s, want deny APPROVAL_INVALID", used.body)
	}
	// A wait that ends before anyone decides denies, naming the request.
	short := r.ask(payReq(6000, "wait", "1s"))
	if short.Decision != "deny" || short.Code != "APPROVAL_TIMEOUT" || short.Approval == nil {
		t.Fatalf("a short wait: %s, want deny APPROVAL_TIMEOUT naming the request", short.body)
	}
	for _, bad := range []map[string]any{payReq(5000, "wait", "soon"), payReq(5000, "wait", "-1s"),
		{"tool_name": "pay", "wait": 30}, {"tool_name": "pay", "approval": 7}, {"tool_name": "pay", "approval": ""}} {
		if b := r.ask(bad); b.status != http.StatusBadRequest || !strings.Contains(b.body, "error") {
			t.Errorf("%v: HTTP %d %s, want 400 with an error", bad, b.status, b.body)
		}
	}
}
