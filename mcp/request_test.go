package mcp

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/mcp/jsonrpc"
)

// FuzzCallRequestIsTheDocument: the HTTP proxy builds a call's request in
// Go (callRequest); the stdio guard sends it as JSON (mcpRequestDoc) to be
// decoded as /v1/evaluate decodes a body. Both must give the same request,
// and the same error at the element limit, for any arguments the proxy's
// reader lets through (valid JSON) and any session id (a header: any bytes).
func FuzzCallRequestIsTheDocument(f *testing.F) {
	for _, seed := range []struct {
		tool, session, agent string
		hasAgent             bool
		action               string
		args                 string
		max                  int
	}{
		{"read_file", "", "", false, "call", `{"path":"/secrets/db-password"}`, engine.DefaultMaxElements},
		{"pay", "sess-1", "billing-bot", true, "call", `{"amount":5000,"currency":"EUR","n":1e400}`, 0},
		{"x", "s\xff\xfeid", "a\u2028b", true, "get", `{"a":[1,2,{"b":null}],"c":"\ud800"}`, 9},
		{"x", "s\xff\xfeid", "", false, "read", `{"k":1}`, 0},
		{"x", "", "", false, "complete", `null`, 5},
		{"x", "", "", false, "call", `[1,2,3]`, 8},
		{"x", "s", "", false, "call", `"just a string"`, 6},
		{"x", "s", "a", true, "call", `{"k":1}`, 7},
		{"x", "s", "a", true, "call", `{"k":1}`, 8},
		{"x", "s", "a", true, "call", ``, 6},
		{"x", "s", "a", true, "call", ` {"deep":[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]} `, 20},
		{"x", "", "", false, "call", `{"a":1} trailing`, 0},
		{"x", "", "", false, "call", strings.Repeat("[", 9999) + strings.Repeat("]", 9999), 0},
	} {
		f.Add(seed.tool, seed.session, seed.agent, seed.hasAgent, seed.action, []byte(seed.args), seed.max)
	}
	f.Fuzz(func(t *testing.T, tool, session, agentID string, hasAgent bool, action string, args []byte, max int) {
		if len(args) > 0 && !json.Valid(args) {
			// No request is built from such arguments: the reader refuses
			// the body first.
			mustRefuse(t, args)
			return
		}
		var agent *string
		if hasAgent {
			agent = &agentID
		}
		tool, agentID, action = engine.DecodedString(tool), engine.DecodedString(agentID), engine.DecodedString(action) // the reader decodes them from JSON
		doc := mcpRequestDoc(tool, "files", action, args, session, agent)
		if !json.Valid(doc) {
			// Nested past encoding/json's limit once inside the document:
			// the reader refuses the body (two levels deeper still) first.
			mustRefuse(t, args)
			return
		}
		want, wantErr := engine.DecodeRequestLimit(doc, max)
		got, gotErr := callRequest(tool, "files", action, args, session, agent, max)
		switch {
		case (wantErr == nil) != (gotErr == nil):
			t.Fatalf("document: %v; built: %v\n%s", wantErr, gotErr, doc)
		case wantErr != nil && wantErr.Error() != gotErr.Error():
			t.Fatalf("errors differ:\ndocument: %v\nbuilt:    %v", wantErr, gotErr)
		case wantErr == nil && !reflect.DeepEqual(want, got):
			t.Fatalf("requests differ:\ndocument: %#v\nbuilt:    %#v", want, got)
		}
	})
}

// mustRefuse fails unless the proxy's reader refuses a tools/call whose
// arguments are args.
func mustRefuse(t *testing.T, args []byte) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":` + string(args) + `}}`
	if _, _, err := jsonrpc.Parse([]byte(body)); err == nil {
		t.Fatalf("the reader accepted arguments no request can be built from: %q", args)
	}
}
