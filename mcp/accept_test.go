package mcp

import (
	"bufio"
	"mime"
	"net/http"
	"strings"
	"testing"
)

// TestCheckRequest: what the proxy accepts of a request, as the agent's
// bytes are parsed by net/http (the proxy's listener and the Unix socket
// both use its parser). The end-to-end tests in sidecar/proxy_*_test.go
// hold each rule against the servers that read it otherwise.
func TestCheckRequest(t *testing.T) {
	const json = "Content-Type: application/json\r\n"
	for _, c := range []struct {
		name, head string
		status     int // 0: accepted
	}{
		{"a POST", "POST /mcp/a HTTP/1.1\r\n" + json + "Content-Length: 2", 0},
		{"a chunked POST", "POST /mcp/a HTTP/1.1\r\n" + json + "Transfer-Encoding: chunked", 0},
		{"a GET", "GET /mcp/a HTTP/1.1\r\nAccept: text/event-stream", 0},
		{"a GET with Content-Length: 0", "GET /mcp/a HTTP/1.1\r\nContent-Length: 0", 0},
		{"a DELETE", "DELETE /mcp/a HTTP/1.1\r\nMcp-Session-Id: s", 0},
		{"an OPTIONS", "OPTIONS /mcp/a HTTP/1.1\r\nAccess-Control-Request-Method: POST", 0},
		{"post", "post /mcp/a HTTP/1.1\r\n" + json + "Content-Length: 2", http.StatusMethodNotAllowed},
		{"Get", "Get /mcp/a HTTP/1.1", http.StatusMethodNotAllowed},
		{"HEAD", "HEAD /mcp/a HTTP/1.1", http.StatusMethodNotAllowed},
		{"PUT", "PUT /mcp/a HTTP/1.1\r\n" + json + "Content-Length: 2", http.StatusMethodNotAllowed},
		{"a GET with a body", "GET /mcp/a HTTP/1.1\r\nContent-Length: 2", http.StatusBadRequest},
		{"a DELETE with a chunked body", "DELETE /mcp/a HTTP/1.1\r\nTransfer-Encoding: chunked", http.StatusBadRequest},
		{"an OPTIONS with a body", "OPTIONS /mcp/a HTTP/1.1\r\nContent-Length: 1", http.StatusBadRequest},
		{"Upgrade", "GET /mcp/a HTTP/1.1\r\nUpgrade: websocket", http.StatusBadRequest},
		{"upgrade in Connection", "GET /mcp/a HTTP/1.1\r\nConnection: keep-alive\r\nConnection: Upgrade", http.StatusBadRequest},
		{"h2c on a POST", "POST /mcp/a HTTP/1.1\r\n" + json + "Connection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nContent-Length: 2", http.StatusBadRequest},
		{"Mcp_Name", "POST /mcp/a HTTP/1.1\r\n" + json + "Mcp_Name: x\r\nContent-Length: 2", http.StatusBadRequest},
		{"mcp_param_x", "POST /mcp/a HTTP/1.1\r\n" + json + "mcp_param_x: 1\r\nContent-Length: 2", http.StatusBadRequest},
		{"MCP-PARAM_X", "POST /mcp/a HTTP/1.1\r\n" + json + "MCP-PARAM_X: 1\r\nContent-Length: 2", http.StatusBadRequest},
		{"Mcp_Session_Id on a GET", "GET /mcp/a HTTP/1.1\r\nMcp_Session_Id: s", http.StatusBadRequest},
		{"an underscore elsewhere", "POST /mcp/a HTTP/1.1\r\n" + json + "X_Mcp_Name: x\r\nMcp-Name: y\r\nContent-Length: 2", 0},
		{"Mcp_ alone", "POST /mcp/a HTTP/1.1\r\n" + json + "Mcp_: x\r\nContent-Length: 2", http.StatusBadRequest},
		{"Content-Encoding", "POST /mcp/a HTTP/1.1\r\n" + json + "Content-Encoding: br\r\nContent-Length: 2", http.StatusUnsupportedMediaType},
		{"Content-Encoding: identity", "POST /mcp/a HTTP/1.1\r\n" + json + "Content-Encoding: identity\r\nContent-Length: 2", http.StatusUnsupportedMediaType},
		{"an empty Content-Encoding", "POST /mcp/a HTTP/1.1\r\n" + json + "Content-Encoding: \r\nContent-Length: 2", http.StatusUnsupportedMediaType},
		{"no Content-Type", "POST /mcp/a HTTP/1.1\r\nContent-Length: 2", http.StatusUnsupportedMediaType},
		{"two Content-Types", "POST /mcp/a HTTP/1.1\r\n" + json + json + "Content-Length: 2", http.StatusUnsupportedMediaType},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(c.head + "\r\nHost: x\r\n\r\n")))
			must(t, err)
			rf := checkRequest(r)
			switch {
			case c.status == 0 && rf != nil:
				t.Fatalf("refused %d: %s", rf.status, rf.msg)
			case c.status != 0 && rf == nil:
				t.Fatalf("accepted, want %d", c.status)
			case c.status != 0 && rf.status != c.status:
				t.Fatalf("refused %d (%s), want %d", rf.status, rf.msg, c.status)
			}
		})
	}
}

// TestUTF8JSON: the Content-Types a POST may have.
func TestUTF8JSON(t *testing.T) {
	for _, ct := range []string{
		"application/json", "Application/JSON", "application/json; charset=utf-8", "application/json;charset=UTF-8",
		`application/json; charset="utf-8"`, "application/json ; charset=Utf-8 ",
	} {
		if err := utf8JSON(ct); err != nil {
			t.Errorf("%q refused: %v", ct, err)
		}
	}
	for _, ct := range []string{
		"", "application/jsonx", "application/json-patch+json", "text/json", "text/plain; x=application/json", "application/*",
		"application/json;", "application/json; charset=utf-7", `application/json; charset="utf-7"`, "application/json; charset=utf8",
		"application/json; charset=utf-8; charset=utf-7", "application/json; charset=utf-8; profile=x", "application/json; profile=x",
		`application/json; charset="utf-8`, `application/json; charset=utf-8"`, `application/json; charset="utf\-8"`,
		"application/json; charset = utf-8", "application/json; charset*=utf-8''utf-8", "application/json, text/plain",
	} {
		if utf8JSON(ct) == nil {
			t.Errorf("%q accepted", ct)
		}
	}
}

// FuzzUTF8JSON: whatever the proxy accepts, Go's MIME parser (as the Go
// SDK's server and most Go servers read it) reads as application/json in
// UTF-8 too; the npm content-type package reads parameters with the same
// grammar (token=token or quoted-string after ';').
func FuzzUTF8JSON(f *testing.F) {
	for _, seed := range []string{"application/json", "application/json; charset=utf-8", `application/json;charset="UTF-8"`,
		"application/json; charset=utf-7", "application/json; charset=utf-8; charset=utf-7", "application/json; charset*=utf-8''x"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, ct string) {
		if utf8JSON(ct) != nil {
			return
		}
		media, params, err := mime.ParseMediaType(ct)
		if err != nil {
			t.Fatalf("%q accepted, but Go's MIME parser refuses it: %v", ct, err)
		}
		if media != "application/json" || len(params) > 1 || (len(params) == 1 && !strings.EqualFold(params["charset"], "utf-8")) {
			t.Fatalf("%q accepted, but Go's MIME parser reads it as %q %v", ct, media, params)
		}
	})
}

// BenchmarkCheckRequest: what the checks add to every request, a
// 2026-07-28 tools/call POST with the headers the Go SDK client sends.
func BenchmarkCheckRequest(b *testing.B) {
	r, err := http.ReadRequest(bufio.NewReader(strings.NewReader("POST /mcp/files HTTP/1.1\r\nHost: 127.0.0.1:8182\r\n" +
		"Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\nContent-Length: 1100\r\n" +
		"Mcp-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: read_file\r\nUser-Agent: Go-http-client/1.1\r\n" +
		"Accept-Encoding: gzip\r\n\r\n")))
	must(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if checkRequest(r) != nil {
			b.Fatal("refused")
		}
	}
}
