package mcp

import (
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/internal/scenario"
	"github.com/toolgate/toolgate/mcp/jsonrpc"
)

// BenchmarkMCPDecideCall is what the proxy does to a tools/call before
// forwarding it: read the message, check its headers, decide it.
func BenchmarkMCPDecideCall(b *testing.B) {
	p := newTestProxy(b, decide.Config{AgentID: "bench"}, "files=http://127.0.0.1:1/mcp")
	p.serve(b, scenario.Reference(100))
	body := []byte(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"` + strings.Repeat("p", 1024) + `"}}}`)
	r, _ := http.NewRequest(http.MethodPost, "http://x/mcp/files", nil)
	r.Header.Set("Mcp-Name", "read_file")
	r.Header.Set("Mcp-Method", "tools/call")
	rt := p.routes["files"]
	// As after the agent's tools/list: the tool's schema is known.
	rt.params.learn([]byte(`{"name":"read_file","inputSchema":{"type":"object","properties":{"path":{"type":"string"}}}}`))
	b.ReportAllocs()
	for b.Loop() {
		msgs, batch, err := jsonrpc.Parse(body)
		if err != nil {
			b.Fatal(err)
		}
		if err := checkMCPHeaders(r.Header, paramHeaderNames(r.Header), msgs, batch, &rt.params); err != nil {
			b.Fatal(err)
		}
		if _, ok, _, _ := p.decideCall(r, rt, &msgs[0], len(body), nil); !ok {
			b.Fatal("denied")
		}
	}
}
