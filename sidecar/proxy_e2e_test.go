package sidecar

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/mcptest"
	mcpproxy "github.com/toolgate/toolgate/mcp"
)

// TestMCPProxyDecidesCalls: over both protocol versions, an allowed call
// reaches the server and returns its result; pay over the cap is denied on
// its argument, never reaches the server, and the agent reads why; a freeze
// applies to the open session at its next call.
func TestMCPProxyDecidesCalls(t *testing.T) {
	for _, version := range mcpVersions {
		t.Run(version, func(t *testing.T) {
			up := startMCPServer(t)
			rig := startMCPRig(t, up.endpoint(version), mcptest.Bundle(), nil)
			cs := rig.connect(version, nil, nil)

			held := func() (count, sum float64) {
				return metricValue(t, rig.decisions, `toolgate_sidecar_mcp_held_seconds_count{upstream="pay"}`),
					metricValue(t, rig.decisions, `toolgate_sidecar_mcp_held_seconds_sum{upstream="pay"}`)
			}
			count0, sum0 := held()
			if got := resultText(t, callTool(t, cs, "pay", map[string]any{"amount": 40})); got != "paid 40" {
				t.Fatalf("allowed pay answered %q, want paid 40", got)
			}
			d := deniedDecision(t, callTool(t, cs, "pay", map[string]any{"amount": 5000}),
				"pay-cap: payments over 100 need a human")
			if d["matchedRuleId"] != "pay-cap" || d["matchedPolicyId"] != "payments" {
				t.Fatalf("deny decision %v, want policy payments rule pay-cap", d)
			}
			// The forwarded call is timed through the proxy, the denied one
			// (never sent) is not.
			if count, sum := held(); count != count0+1 || sum <= sum0 || sum-sum0 > 10 {
				t.Fatalf("mcp_held_seconds count %v -> %v, sum %v -> %v: want the one forwarded call, timed", count0, count, sum0, sum)
			}
			if got := up.stats(t).Calls["pay"]; got != 1 {
				t.Fatalf("the server saw %d pay calls, want only the allowed one", got)
			}
			// Logged like any decision, with the MCP request's fields: the
			// deny, and the allowed call (recorded once it is sent).
			eventually(t, "the allow and the deny are logged", func() bool {
				seen := map[any]bool{}
				for _, l := range rig.logs.lines(t) {
					req, _ := l["request"].(map[string]any)
					input, _ := req["input"].(map[string]any)
					if l["tool_name"] == "pay" && l["framework"] == "mcp" && l["agent_id"] == mcpAgent &&
						req["server"] == "pay" && req["action"] == "call" {
						seen[fmt.Sprintf("%v %v", l["decision"], input["amount"])] = true
					}
				}
				return seen["allow 40"] && seen["deny 5000"]
			})

			frozen := mcptest.Bundle()
			frozen.FrozenAgents = []engine.FrozenAgent{{ID: mcpAgent, Reason: "INC-13: looping on payments"}}
			rig.publish(frozen)
			deniedDecision(t, callTool(t, cs, "read_file", map[string]any{"path": "/etc/motd"}),
				"AGENT_FROZEN: INC-13: looping on payments")
			if got := up.stats(t).Calls["read_file"]; got != 0 {
				t.Fatalf("the server saw %d read_file calls from a frozen agent", got)
			}
			rig.publish(mcptest.Bundle())
			if got := resultText(t, callTool(t, cs, "read_file", map[string]any{"path": "/etc/motd"})); got != "contents of /etc/motd" {
				t.Fatalf("after the unfreeze read_file answered %q", got)
			}
		})
	}
}

// TestMCPProxyStreamsUnbuffered: a progress notification the tool sends
// reaches the agent while the tool is still running.
func TestMCPProxyStreamsUnbuffered(t *testing.T) {
	for _, version := range mcpVersions {
		t.Run(version, func(t *testing.T) {
			up := startMCPServer(t)
			rig := startMCPRig(t, up.endpoint(version), mcptest.Bundle(), nil)
			progress := make(chan string, 1)
			cs := rig.connect(version, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
					progress <- req.Params.Message
				}}, nil)
			done := make(chan *mcp.CallToolResult, 1)
			go func() {
				params := &mcp.CallToolParams{Name: "stream", Arguments: map[string]any{"note": "n1"}}
				params.SetProgressToken("tok-1")
				res, err := cs.CallTool(context.Background(), params)
				if err != nil {
					t.Errorf("stream call: %v", err)
				}
				done <- res
			}()
			select {
			case msg := <-progress:
				if msg != "started n1" {
					t.Fatalf("progress %q", msg)
				}
			case <-done:
				t.Fatal("the call returned before its progress notification arrived")
			case <-time.After(20 * time.Second):
				t.Fatal("the progress notification did not arrive while the tool ran: the stream is buffered")
			}
			up.release(t)
			select {
			case res := <-done:
				if res != nil && resultText(t, res) != "streamed n1" {
					t.Fatalf("stream answered %q", resultText(t, res))
				}
			case <-time.After(20 * time.Second):
				t.Fatal("the stream call did not return after release")
			}
		})
	}
}

// TestMCPProxyCredentials: the upstream sees the sidecar's credential, not
// the agent's, and nothing the agent receives carries it.
func TestMCPProxyCredentials(t *testing.T) {
	up := startMCPServer(t)
	auth := filepath.Join(t.TempDir(), "github-mcp-token")
	must(t, os.WriteFile(auth, []byte("Authorization: "+upstreamSecret+"\n"), 0o600))
	var rig *mcpRig
	for _, version := range mcpVersions {
		rig = startMCPRig(t, up.endpoint(version), mcptest.Bundle(), func(o *Options) {
			o.MCP.UpstreamAuth = []string{"pay=" + auth}
			o.MCP.AuthRecheck = 20 * time.Millisecond
		})
		tr := &recordingTransport{agentAuth: "Bearer agent-guess"}
		cs := rig.connect(version, nil, tr)
		if got := resultText(t, callTool(t, cs, "read_file", map[string]any{"path": "a"})); got != "contents of a" {
			t.Fatalf("%s: read_file answered %q", version, got)
		}
		if strings.Contains(tr.headers(), "upstream-secret") {
			t.Fatalf("%s: the agent received the upstream credential in:\n%s", version, tr.headers())
		}
	}
	if got := up.stats(t).Authorization; len(got) != 1 || got[0] != upstreamSecret {
		t.Fatalf("the upstream saw Authorization %q, want only the sidecar's", got)
	}

	// A rotated Secret is followed without a restart; a broken one is
	// refused and the last good credential kept.
	replace := func(content string) {
		must(t, os.WriteFile(auth+".new", []byte(content), 0o600))
		must(t, os.Rename(auth+".new", auth))
		time.Sleep(50 * time.Millisecond)
	}
	cs := rig.connect("2026-07-28", nil, nil)
	replace("Authorization: Bearer rotated-2\n")
	callTool(t, cs, "read_file", map[string]any{"path": "b"})
	replace("not a header line\n")
	callTool(t, cs, "read_file", map[string]any{"path": "c"})
	if got := up.stats(t).Authorization; !slices.Equal(got, []string{upstreamSecret, "Bearer rotated-2"}) {
		t.Fatalf("after rotating the credential the upstream saw %q", got)
	}
}

// TestMCPProxyRefusesSmuggling: a call whose headers disagree with its
// body, or whose body two parsers could read differently, is refused with
// 400 and never reaches the server.
func TestMCPProxyRefusesSmuggling(t *testing.T) {
	up := startMCPServer(t)
	rig := startMCPRig(t, up.endpoint("2026-07-28"), mcptest.Bundle(), nil)
	for _, c := range []struct {
		name    string
		headers map[string]string
		body    string
		want    string
	}{
		{"Mcp-Name disagrees", map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "read_file"},
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","arguments":{"amount":5}}}`, "Mcp-Name"},
		{"Mcp-Name base64 disagrees", map[string]string{"Mcp-Method": "tools/call", "Mcp-Name": "=?base64?cmVhZF9maWxl?="},
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","arguments":{"amount":5}}}`, "Mcp-Name"},
		{"Mcp-Method disagrees", map[string]string{"Mcp-Method": "tools/list"},
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","arguments":{"amount":5}}}`, "Mcp-Method"},
		{"case-folded duplicate key", nil,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","Name":"pay","arguments":{"amount":5}}}`, "twice"},
		{"duplicate argument", nil,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","arguments":{"amount":5,"amount":5000}}}`, "twice"},
		{"case-folded argument", nil,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","arguments":{"amount":5,"Amount":5000}}}`, "twice"},
	} {
		req, err := http.NewRequest(http.MethodPost, rig.proxy, strings.NewReader(c.body))
		must(t, err)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
		for k, v := range c.headers {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		body := readAll(t, resp)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, c.want) || !strings.Contains(body, "toolgate") {
			t.Errorf("%s: %d %s, want 400 from toolgate naming %s", c.name, resp.StatusCode, body, c.want)
		}
	}
	if got := up.stats(t).Calls; len(got) != 0 {
		t.Fatalf("the server saw calls %v; every one was refused", got)
	}
}

// TestMCPProxyUpstreamDown: a call to an upstream that does not answer
// fails as a JSON-RPC error.
func TestMCPProxyUpstreamDown(t *testing.T) {
	for _, version := range mcpVersions {
		t.Run(version, func(t *testing.T) {
			up := startMCPServer(t)
			rig := startMCPRig(t, up.endpoint(version), mcptest.Bundle(), nil)
			// Without the session's GET stream, whose end would close the
			// SDK client's session before the call is made.
			rig.noStandaloneSSE = true
			cs := rig.connect(version, nil, nil)
			// Listed while it is up, as agents do: the call's argument keys
			// can be checked against its tool's schema without asking it.
			listTools(t, cs)
			up.stop()
			held := `toolgate_sidecar_mcp_held_seconds_count{upstream="pay"}`
			sent := metricValue(t, rig.decisions, held)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "a"}})
			if err == nil || !strings.Contains(err.Error(), `toolgate: MCP upstream "pay" did not answer`) {
				t.Fatalf("call with the upstream down: %v, want toolgate's JSON-RPC error", err)
			}
			if got := metricValue(t, rig.decisions, held); got != sent {
				t.Errorf("%s went from %v to %v for a call never sent", held, sent, got)
			}
			if _, metrics := get(t, rig.decisions+"/metrics"); !strings.Contains(metrics, `toolgate_sidecar_mcp_requests_total{outcome="upstream_error",upstream="pay"} 1`+"\n") {
				t.Errorf("upstream_error not counted once:\n%s", metrics)
			}
			// Allowed, then not delivered: the decision is logged all the same.
			eventually(t, "the allowed call is logged", func() bool {
				for _, l := range rig.logs.lines(t) {
					if l["decision"] == "allow" && l["tool_name"] == "read_file" && l["framework"] == "mcp" {
						return true
					}
				}
				return false
			})
		})
	}
}

func readAll(t testing.TB, resp *http.Response) string {
	t.Helper()
	defer func() { _ = resp.Body.Close() }()
	var sb strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		sb.Write(buf[:n])
		if err != nil {
			return sb.String()
		}
	}
}

// TestMCPProxyFiltersToolsList: a tool the bundle denies this agent
// whatever the arguments is hidden, one decided on its arguments stays; a
// bundle change re-filters and tells the open session, and a hidden tool
// called anyway is denied like any other.
func TestMCPProxyFiltersToolsList(t *testing.T) {
	for _, version := range mcpVersions {
		t.Run(version, func(t *testing.T) {
			up := startMCPServer(t)
			rig := startMCPRig(t, up.endpoint(version), mcptest.Bundle(), nil)
			changed := make(chan struct{}, 8)
			cs := rig.connect(version, &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
			}, nil)
			if got, want := listTools(t, cs), "echo pay query read_file route stream"; got != want {
				t.Fatalf("tools/list through the proxy: %s, want %s (delete_file hidden)", got, want)
			}
			deniedDecision(t, callTool(t, cs, "delete_file", map[string]any{"path": "/tmp/x"}),
				"no-delete: files are never deleted by agents")

			// Another agent's rule hides nothing here; this agent's does.
			b := mcptest.Bundle()
			b.Policies[0].Rules = append(b.Policies[0].Rules,
				engine.Rule{ID: "others-no-read", Effect: "deny", Subjects: &engine.Subjects{Agents: []string{"someone-else"}},
					Conditions: []engine.Condition{{Field: "tool_name", Operator: "eq", Value: raw("read_file")}}},
				engine.Rule{ID: "bot-no-stream", Effect: "deny", Subjects: &engine.Subjects{Agents: []string{mcpAgent}},
					Conditions: []engine.Condition{{Field: "tool_name", Operator: "eq", Value: raw("stream")}}})
			rig.publish(b)
			select {
			case <-changed:
			case <-time.After(20 * time.Second):
				t.Fatal("no notifications/tools/list_changed after the bundle changed what is hidden")
			}
			if got, want := listTools(t, cs), "echo pay query read_file route"; got != want {
				t.Fatalf("tools/list after the change: %s, want %s", got, want)
			}

			// A frozen agent is denied every call, so every tool is hidden;
			// thawed, its tools come back. Each change is told.
			frozen := b
			frozen.FrozenAgents = []engine.FrozenAgent{{ID: mcpAgent, Reason: "incident 7"}}
			for _, step := range []struct {
				b    engine.Bundle
				want string
			}{{frozen, ""}, {b, "echo pay query read_file route"}} {
				rig.publish(step.b)
				select {
				case <-changed:
				case <-time.After(20 * time.Second):
					t.Fatalf("no notifications/tools/list_changed when the agent's freeze changed (want list %q)", step.want)
				}
				if got := listTools(t, cs); got != step.want {
					t.Fatalf("tools/list: %q, want %q", got, step.want)
				}
			}

			// A freeze that ends by itself changes the list with nothing
			// else happening: the session is told then too.
			ends := time.Now().Add(2 * time.Second)
			expiring := b
			expiring.FrozenAgents = []engine.FrozenAgent{{ID: mcpAgent, Reason: "cool-off", ExpiresAt: &ends}}
			rig.publish(expiring)
			select {
			case <-changed:
			case <-time.After(20 * time.Second):
				t.Fatal("no notifications/tools/list_changed when the expiring freeze began")
			}
			if got := listTools(t, cs); got != "" {
				t.Fatalf("tools/list while frozen until %v: %q, want none", ends, got)
			}
			select {
			case <-changed:
			case <-time.After(20 * time.Second):
				t.Fatal("no notifications/tools/list_changed when the freeze expired")
			}
			if time.Now().Before(ends) {
				t.Fatalf("told of a change before the freeze expired at %v", ends)
			}
			if got := listTools(t, cs); got != "echo pay query read_file route" {
				t.Fatalf("tools/list after the freeze expired: %q, want echo pay query read_file route", got)
			}
		})
	}
}

func listTools(t testing.TB, cs *mcp.ClientSession) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatalf("tools/list: %v", err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	return strings.Join(names, " ")
}

// TestMCPProxyBatchesAndLimits: a batch holding a denied call is not
// forwarded at all, a denied notification is dropped, the sidecar's body
// limit holds, and unknown upstreams are 404.
func TestMCPProxyBatchesAndLimits(t *testing.T) {
	up := startMCPServer(t)
	rig := startMCPRig(t, up.endpoint("2026-07-28"), mcptest.Bundle(), nil)
	status, body := post(t, rig.proxy, `[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","arguments":{"amount":5000}}},`+
		`{"jsonrpc":"2.0","id":"two","method":"tools/call","params":{"name":"read_file","arguments":{"path":"a"}}},`+
		`{"jsonrpc":"2.0","method":"notifications/initialized"}]`)
	var answers []struct {
		ID     any `json:"id"`
		Result *struct {
			IsError bool `json:"isError"`
		} `json:"result"`
		Error *struct {
			Code int `json:"code"`
		} `json:"error"`
	}
	must(t, json.Unmarshal(body, &answers))
	if status != http.StatusOK || len(answers) != 2 || answers[0].ID != 1.0 || answers[0].Result == nil || !answers[0].Result.IsError ||
		answers[1].ID != "two" || answers[1].Error == nil || answers[1].Error.Code != mcpproxy.RPCNotForwarded {
		t.Fatalf("batch with a denied call: %d %s", status, body)
	}
	// Both calls were decided, and both decisions are logged: the allowed
	// one too, though the batch was never sent.
	eventually(t, "both of the batch's decisions are logged", func() bool {
		seen := map[string]bool{}
		for _, l := range rig.logs.lines(t) {
			seen[fmt.Sprintf("%v %v", l["decision"], l["tool_name"])] = true
		}
		return seen["deny pay"] && seen["allow read_file"]
	})
	// A 2026-07-28 deny says its result is complete, as the SDKs' servers do.
	req, err := http.NewRequest(http.MethodPost, rig.proxy, strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"pay","arguments":{"amount":5000}}}`))
	must(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Mcp-Protocol-Version", "2026-07-28")
	req.Header.Set("Mcp-Method", "tools/call")
	req.Header.Set("Mcp-Name", "pay")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	if text := readAll(t, resp); resp.StatusCode != http.StatusOK || !strings.Contains(text, `"isError":true,"resultType":"complete"`) {
		t.Fatalf("2026-07-28 deny: %d %s", resp.StatusCode, text)
	}
	status, body = post(t, rig.proxy, `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"pay","arguments":{"amount":5000}}}`)
	if status != http.StatusAccepted || len(body) != 0 {
		t.Fatalf("denied notification: %d %s", status, body)
	}
	status, body = post(t, rig.proxy, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"`+
		strings.Repeat("a", decide.MaxRequestBytes)+`"}}}`)
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(string(body), "limit") {
		t.Fatalf("oversized body: %d %s", status, body)
	}
	status, body = post(t, rig.proxy, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{"path":"a"}}}`)
	if status != http.StatusOK || !strings.Contains(string(body), `"code":-32602`) {
		t.Fatalf("tools/call without a name: %d %s", status, body)
	}
	if status, text := get(t, strings.TrimSuffix(rig.proxy, "/pay")+"/nope"); status != http.StatusNotFound || !strings.Contains(text, "/mcp/pay") {
		t.Fatalf("unknown upstream: %d %s", status, text)
	}
	if got := up.stats(t).Calls; len(got) != 0 {
		t.Fatalf("the server saw calls %v", got)
	}
	_, metrics := get(t, rig.decisions+"/metrics")
	for _, want := range []string{
		`toolgate_sidecar_mcp_requests_total{outcome="denied",upstream="pay"} 4`,
		`toolgate_sidecar_mcp_requests_total{outcome="refused",upstream="pay"} 1`,
		`toolgate_sidecar_mcp_requests_total{outcome="forwarded",upstream="pay"} 0`,
		`toolgate_sidecar_mcp_held_seconds_count{upstream="pay"} 0`,
	} {
		if !strings.Contains(metrics, want+"\n") {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// TestMCPProxyOnTheSocket: the proxy is served on the decision Unix
// socket too, which code in the Pod cannot take over.
func TestMCPProxyOnTheSocket(t *testing.T) {
	up := startMCPServer(t)
	sock := filepath.Join(t.TempDir(), "toolgate.sock")
	rig := startMCPRig(t, up.endpoint("2025-11-25"), mcptest.Bundle(), func(o *Options) {
		o.Listen = []string{"127.0.0.1:0", "unix://" + sock}
	})
	rig.proxy = "http://sidecar/mcp/pay"
	rig.dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}
	cs := rig.connect("2025-11-25", nil, nil)
	held := `toolgate_sidecar_mcp_held_seconds_count{upstream="pay"}`
	sent := metricValue(t, rig.decisions, held)
	if got := resultText(t, callTool(t, cs, "pay", map[string]any{"amount": 3})); got != "paid 3" {
		t.Fatalf("pay over the socket: %q", got)
	}
	// Timed from its handler's start here, which net/http serves.
	if got := metricValue(t, rig.decisions, held); got != sent+1 {
		t.Errorf("%s went from %v to %v for one call over the socket", held, sent, got)
	}
	deniedDecision(t, callTool(t, cs, "pay", map[string]any{"amount": 300}), "pay-cap: payments over 100 need a human")
}

// TestMCPProxyStreamsSurviveAConnectionFlood: at --max-connections a flood
// of silent connections evicts its own kind, never a session's open
// stream, and calls still get through.
func TestMCPProxyStreamsSurviveAConnectionFlood(t *testing.T) {
	up := startMCPServer(t)
	rig := startMCPRig(t, up.endpoint("2025-11-25"), mcptest.Bundle(), func(o *Options) { o.MaxConnections = 4 })
	changed := make(chan struct{}, 8)
	cs := rig.connect("2025-11-25", &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	}, nil)
	listTools(t, cs) // the GET stream is open by now
	host := strings.TrimSuffix(strings.TrimPrefix(rig.proxy, "http://"), "/mcp/pay")
	for range 20 {
		c, err := net.Dial("tcp", host)
		must(t, err)
		t.Cleanup(func() { _ = c.Close() })
	}
	if got := resultText(t, callTool(t, cs, "pay", map[string]any{"amount": 1})); got != "paid 1" {
		t.Fatalf("call during the flood: %q", got)
	}
	b := mcptest.Bundle()
	b.Policies[0].Rules = append(b.Policies[0].Rules, engine.Rule{ID: "no-stream", Effect: "deny",
		Conditions: []engine.Condition{{Field: "tool_name", Operator: "eq", Value: raw("stream")}}})
	rig.publish(b)
	select {
	case <-changed:
	case <-time.After(20 * time.Second):
		t.Fatal("the session's GET stream was evicted by the flood: no list_changed")
	}
	if n := metricValue(t, rig.decisions, "toolgate_sidecar_connections_evicted_total"); n < 10 {
		t.Fatalf("%v connections evicted; the flood should have been", n)
	}
}
