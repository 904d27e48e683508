package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
	mcpproxy "github.com/toolgate/toolgate/mcp"
)

// methodsBundle allows everything but reading (or subscribing to) a
// resource under file:///secrets/, the admin prompt, and completing the
// admin prompt's arguments: one rule per method decided besides
// tools/call, each on the fields docs/policies.md names.
func methodsBundle() engine.Bundle {
	raw := func(v any) json.RawMessage { b, _ := json.Marshal(v); return b }
	cond := func(field, op string, v any) engine.Condition {
		return engine.Condition{Field: field, Operator: op, Value: raw(v)}
	}
	return engine.Bundle{Policies: []engine.Policy{{ID: "mcp-methods", Version: 1, DefaultEffect: "allow", Rules: []engine.Rule{
		{ID: "no-secret-resources", Effect: "deny", Description: "secrets are not read by agents",
			Conditions: []engine.Condition{cond("action", "eq", "read"), cond("input.uri", "starts_with", "file:///secrets/")}},
		{ID: "no-admin-prompt", Effect: "deny", Description: "the admin prompt is for humans",
			Conditions: []engine.Condition{cond("action", "eq", "get"), cond("tool_name", "eq", "admin")}},
		{ID: "no-admin-completions", Effect: "deny", Description: "nor are its arguments completed",
			Conditions: []engine.Condition{cond("action", "eq", "complete"), cond("input.ref.name", "eq", "admin")}},
	}}}}
}

// methodCase is one request of a method decided besides tools/call, sent
// through the SDK client: the rule that denies it ("" when allowed), what
// the server counts when it runs it, and the decision log line's
// tool_name and action.
type methodCase struct {
	name, rule, counted, tool, action string
	send                              func(ctx context.Context, cs *mcp.ClientSession) error
}

func methodCases(version string) []methodCase {
	read := func(uri string) func(context.Context, *mcp.ClientSession) error {
		return func(ctx context.Context, cs *mcp.ClientSession) error {
			_, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
			return err
		}
	}
	prompt := func(name string) func(context.Context, *mcp.ClientSession) error {
		return func(ctx context.Context, cs *mcp.ClientSession) error {
			_, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: name, Arguments: map[string]string{"who": "ops"}})
			return err
		}
	}
	complete := func(name string) func(context.Context, *mcp.ClientSession) error {
		return func(ctx context.Context, cs *mcp.ClientSession) error {
			_, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: name},
				Argument: mcp.CompleteParamsArgument{Name: "who", Value: "o"}})
			return err
		}
	}
	cases := []methodCase{
		{"read a public resource", "", "resources/read file:///public/readme", "resources/read", "read", read("file:///public/readme")},
		{"read a secret", "no-secret-resources", "resources/read file:///secrets/key", "resources/read", "read", read("file:///secrets/key")},
		{"get the greet prompt", "", "prompts/get greet", "greet", "get", prompt("greet")},
		{"get the admin prompt", "no-admin-prompt", "prompts/get admin", "admin", "get", prompt("admin")},
		{"complete greet's argument", "", "completion/complete greet who", "completion/complete", "complete", complete("greet")},
		{"complete admin's argument", "no-admin-completions", "completion/complete admin who", "completion/complete", "complete", complete("admin")},
	}
	// resources/subscribe is a 2025-11-25 request; 2026-07-28 subscribes
	// through subscriptions/listen instead.
	if version < "2026-07-28" {
		subscribe := func(uri string) func(context.Context, *mcp.ClientSession) error {
			return func(ctx context.Context, cs *mcp.ClientSession) error {
				return cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
			}
		}
		cases = append(cases,
			methodCase{"subscribe to a public resource", "", "resources/subscribe file:///public/readme", "resources/subscribe", "read", subscribe("file:///public/readme")},
			methodCase{"subscribe to a secret", "no-secret-resources", "resources/subscribe file:///secrets/key", "resources/subscribe", "read", subscribe("file:///secrets/key")})
	}
	return cases
}

// checkMethodCases sends each case through cs: a denied one fails with
// toolgate's JSON-RPC error naming its rule and never reaches the server
// (calls: what the server counted), an allowed one does, once; each is one
// decision log line (lines: the log) with its tool_name, action and
// decision.
func checkMethodCases(t *testing.T, cs *mcp.ClientSession, cases []methodCase, calls func() map[string]int, lines func() []map[string]any) {
	t.Helper()
	for _, c := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := c.send(ctx, cs)
		cancel()
		switch {
		case c.rule == "" && err != nil:
			t.Errorf("%s: allowed, and failed: %v", c.name, err)
		case c.rule != "":
			var je *jsonrpc.Error
			var data map[string]map[string]any
			if !errors.As(err, &je) || je.Code != mcpproxy.RPCDenied || !strings.HasPrefix(je.Message, c.rule+": ") ||
				json.Unmarshal(je.Data, &data) != nil || data[mcpproxy.MetaDecision]["matchedRuleId"] != c.rule {
				t.Errorf("%s: got %v, want toolgate's JSON-RPC error %d naming rule %s, the decision in its data", c.name, err, mcpproxy.RPCDenied, c.rule)
			}
		}
	}
	got := calls()
	for _, c := range cases {
		want := 1
		if c.rule != "" {
			want = 0
		}
		if got[c.counted] != want {
			t.Errorf("%s: the server ran %q %d times, want %d (it saw %v)", c.name, c.counted, got[c.counted], want, got)
		}
	}
	eventually(t, "each request is one decision log line", func() bool {
		count := map[string]int{}
		for _, l := range lines() {
			req, _ := l["request"].(map[string]any)
			if l["framework"] == "mcp" && req["server"] == "pay" {
				count[fmt.Sprintf("%v %v %v", l["tool_name"], req["action"], l["decision"])]++
			}
		}
		want := map[string]int{}
		for _, c := range cases {
			decision := "allow"
			if c.rule != "" {
				decision = "deny"
			}
			want[fmt.Sprintf("%s %s %s", c.tool, c.action, decision)]++
		}
		for k, n := range want {
			if count[k] != n {
				return false
			}
		}
		return true
	})
}

// TestMCPProxyDecidesResourcesPromptsAndCompletions: resources/read,
// resources/subscribe, prompts/get and completion/complete through the
// proxy are decided as calls are, over both protocol versions: a denied
// one never reaches the official SDK's server and the agent gets a
// JSON-RPC error naming the rule, an allowed one runs; each is one line in
// the decision log with its tool_name and action.
func TestMCPProxyDecidesResourcesPromptsAndCompletions(t *testing.T) {
	for _, version := range mcpVersions {
		t.Run(version, func(t *testing.T) {
			up := startMCPServer(t)
			rig := startMCPRig(t, up.endpoint(version), methodsBundle(), nil)
			cs := rig.connect(version, nil, nil)
			checkMethodCases(t, cs, methodCases(version), func() map[string]int { return up.stats(t).Calls },
				func() []map[string]any { return rig.logs.lines(t) })
		})
	}
}

// TestMCPStdioDecidesResourcesPromptsAndCompletions: the same through
// `toolgate mcp stdio` in front of the official SDK's server over stdio,
// decided by the sidecar.
func TestMCPStdioDecidesResourcesPromptsAndCompletions(t *testing.T) {
	rig := startMCPRig(t, "http://127.0.0.1:1/mcp", methodsBundle(), nil) // its HTTP proxy is not used
	stats := testenv.FreeLoopbackAddr(t)
	cs := connectStdio(t, stdioCommand(t, rig.decisions, stats), "2025-11-25")
	checkMethodCases(t, cs, methodCases("2025-11-25"), func() map[string]int { return stdioServerCalls(t, stats) },
		func() []map[string]any { return rig.logs.lines(t) })
}

// TestMCPProxyDecidesResourceSubscriptionsOnListen: 2026-07-28 subscribes
// to resources with subscriptions/listen (notifications.resourceSubscriptions)
// instead of resources/subscribe; each URI is decided as a
// resources/subscribe: one under /secrets/ is denied with toolgate's
// JSON-RPC error and never forwarded, a public one is.
func TestMCPProxyDecidesResourceSubscriptionsOnListen(t *testing.T) {
	up := startMCPServer(t)
	rig := startMCPRig(t, up.endpoint("2026-07-28"), methodsBundle(), nil)
	u, _ := url.Parse(rig.proxy)
	listen := func(uri string) string {
		body := `{"jsonrpc":"2.0","id":5,"method":"subscriptions/listen","params":{"notifications":{"resourceSubscriptions":["` + uri + `"]},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
		raw := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2026-07-28\r\nMcp-Method: subscriptions/listen\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s", u.Path, u.Host, len(body), body)
		return rawExchange(t, rig.proxy, raw, 3*time.Second)
	}
	got := listen("file:///secrets/key")
	if !strings.HasPrefix(got, "HTTP/1.1 200 ") || !strings.Contains(got, fmt.Sprintf(`"code":%d`, mcpproxy.RPCDenied)) || !strings.Contains(got, "no-secret-resources") {
		t.Fatalf("a listen subscribing to a secret: %q", got)
	}
	if got := listen("file:///public/readme"); strings.Contains(got, "no-secret-resources") || !strings.HasPrefix(got, "HTTP/1.1 200 ") {
		t.Fatalf("a listen subscribing to a public resource: %q", got)
	}
	eventually(t, "both subscriptions are logged as resources/subscribe reads", func() bool {
		seen := map[string]bool{}
		for _, l := range rig.logs.lines(t) {
			req, _ := l["request"].(map[string]any)
			input, _ := req["input"].(map[string]any)
			if l["tool_name"] == "resources/subscribe" && req["action"] == "read" {
				seen[fmt.Sprintf("%v %v", l["decision"], input["uri"])] = true
			}
		}
		return seen["deny file:///secrets/key"] && seen["allow file:///public/readme"]
	})
}
