package mcp

import (
	"encoding/json"
	"io"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/mcptest"
)

// TestFilterAnswers: tools/list answers are filtered alone, in a batch, and
// in an event stream; other messages pass byte for byte.
func TestFilterAnswers(t *testing.T) {
	p := newTestProxy(t, decide.Config{AgentID: mcptest.Agent}, "pay=http://127.0.0.1:1/mcp")
	p.serve(t, mcptest.Bundle())
	rt := p.routes["pay"]
	st := p.static.Load()
	list := func(id string) string {
		return `{"jsonrpc":"2.0","id":` + id + `,"result":{"tools":[{"name":"pay"},{"name":"delete_file","description":"x"},{"name":"read_file"}],"nextCursor":"c2"}}`
	}
	names := func(msg string) string {
		var m struct {
			Result struct {
				Tools []struct {
					Name string `json:"name"`
				} `json:"tools"`
				NextCursor string `json:"nextCursor"`
			} `json:"result"`
		}
		must(t, json.Unmarshal([]byte(msg), &m))
		var out []string
		for _, tool := range m.Result.Tools {
			out = append(out, tool.Name)
		}
		return strings.Join(out, " ") + " next=" + m.Result.NextCursor
	}
	ids := []json.RawMessage{json.RawMessage(`7`), json.RawMessage(`"l2"`)}
	if got := names(string(p.filterAnswers(st, rt, ids, []byte(list("7"))))); got != "pay read_file next=c2" {
		t.Fatalf("single answer: %s", got)
	}
	if got := string(p.filterAnswers(st, rt, ids, []byte(list("8")))); got != list("8") {
		t.Fatalf("an answer to another request changed: %s", got)
	}
	var batch []json.RawMessage
	must(t, json.Unmarshal(p.filterAnswers(st, rt, ids, []byte("["+list(`"l2"`)+`,{"jsonrpc":"2.0","id":3,"result":{}}]`)), &batch))
	if len(batch) != 2 || names(string(batch[0])) != "pay read_file next=c2" || string(batch[1]) != `{"jsonrpc":"2.0","id":3,"result":{}}` {
		t.Fatalf("batch: %s", batch)
	}
	// An event stream: the answer's event rewritten, the others as sent.
	stream := "id: 1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{}}\n\n" +
		"id: 2\nevent: message\ndata: " + list("7") + "\n\n"
	rw := newSSERewriter(io.NopCloser(strings.NewReader(stream)), func(m []byte) []byte { return p.filterAnswers(st, rt, ids, m) }, nil)
	out, err := io.ReadAll(rw)
	must(t, err)
	events := strings.Split(strings.TrimSuffix(string(out), "\n\n"), "\n\n")
	if len(events) != 2 || events[0]+"\n\n" != strings.SplitAfter(stream, "\n\n")[0] ||
		!strings.HasPrefix(events[1], "id: 2\nevent: message\ndata: ") || names(strings.TrimPrefix(events[1], "id: 2\nevent: message\ndata: ")) != "pay read_file next=c2" {
		t.Fatalf("stream rewritten as:\n%s", out)
	}
}

// TestListHidesWhatBoundRolesAreDenied: roles and an environment the sidecar
// binds are known without a call, so a deny scoped by them hides the tool;
// unbound, each call names its own and the tool stays listed.
func TestListHidesWhatBoundRolesAreDenied(t *testing.T) {
	b := engine.Bundle{Policies: []engine.Policy{{ID: "interns", Version: 1, Rules: []engine.Rule{
		{ID: "no-pay-for-interns", Effect: "deny", Subjects: &engine.Subjects{Roles: []string{"intern"}},
			Targets: &engine.Targets{Tools: []string{"pay"}}, When: &engine.When{Environments: []string{"prod"}}},
	}}}}
	for _, tc := range []struct {
		name   string
		roles  []string
		env    string
		hidden bool
	}{
		{"bound intern in prod", []string{"intern"}, "prod", true},
		{"bound analyst", []string{"analyst"}, "prod", false},
		{"bound intern, environment unbound", []string{"intern"}, "", false},
		{"roles unbound", nil, "prod", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newTestProxy(t, decide.Config{Roles: tc.roles, Environment: tc.env}, "pay=http://127.0.0.1:1/mcp")
			p.serve(t, b)
			if got := p.hidden(p.static.Load(), p.routes["pay"], "pay"); got != tc.hidden {
				t.Fatalf("pay hidden = %v, want %v", got, tc.hidden)
			}
		})
	}
}
