package mcp

import (
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/mcp/jsonrpc"
)

// TestMcpNameMatchesPromptsAndResources: 2026-07-28 clients mirror a
// prompt's name and a resource's URI in Mcp-Name as they mirror a tool's
// (the Go SDK's server checks all three); a header that disagrees with the
// body is refused so whatever routes on it sees what was decided.
func TestMcpNameMatchesPromptsAndResources(t *testing.T) {
	for _, c := range []struct {
		body, header, refused string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"greet"}}`, "greet", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"prompts/get","params":{"name":"admin"}}`, "greet", `"greet" does not match the body's "admin" of prompts/get`},
		{`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///secrets/key"}}`, "file:///public/readme", `does not match the body's "file:///secrets/key"`},
		{`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"file:///secrets/key"}}`, "=?base64?ZmlsZTovLy9zZWNyZXRzL2tleQ==?=", ""},
		{`{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"URI":"file:///secrets/key"}}`, "file:///x", `does not match the body's "file:///secrets/key"`},
	} {
		msgs, batch, err := jsonrpc.Parse([]byte(c.body))
		must(t, err)
		h := http.Header{"Mcp-Name": {c.header}}
		err = checkMCPHeaders(h, nil, msgs, batch, &paramSchemas{})
		if (err != nil) != (c.refused != "") || (err != nil && !strings.Contains(err.Error(), c.refused)) {
			t.Errorf("%s with Mcp-Name %s: %v, want refused %q", c.body, c.header, err, c.refused)
		}
	}
}
