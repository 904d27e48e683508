package sidecar

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/internal/httploop"
	"github.com/toolgate/toolgate/internal/mcptest"
)

// The MCP listener's own HTTP/1.1 server (httploop.Server), driven over raw
// TCP with what a well-behaved client never sends, against the real MCP
// server upstream.

// rawExchange sends raw on a new connection to the rig's proxy and reads
// responses until the connection closes or wait passes.
func rawExchange(t *testing.T, proxy, raw string, wait time.Duration) string {
	t.Helper()
	u, err := url.Parse(proxy)
	must(t, err)
	c, err := net.Dial("tcp", u.Host)
	must(t, err)
	defer c.Close()
	_, err = io.WriteString(c, raw)
	must(t, err)
	must(t, c.SetReadDeadline(time.Now().Add(wait)))
	out, _ := io.ReadAll(c)
	return string(out)
}

func callBody(tool, args string) string {
	return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tool + `","arguments":` + args + `,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}}}`
}

// mcpPost is a 2026-07-28 tools/call POST of body (from callBody).
func mcpPost(path, host, body, extra string) string {
	tool := strings.Split(strings.Split(body, `"name":"`)[1], `"`)[0]
	return fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/call\r\nMcp-Name: %s\r\n%sContent-Length: %d\r\n\r\n%s",
		path, host, tool, extra, len(body), body)
}

func TestMCPServerRefusesMalformedRequests(t *testing.T) {
	up := startMCPServer(t)
	rig := startMCPRig(t, up.endpoint("2026-07-28"), mcptest.Bundle(), nil)
	u, _ := url.Parse(rig.proxy)
	for _, tc := range []struct {
		name, raw, want string
	}{
		{"garbage request line", "HELLO\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		{"no Host on HTTP/1.1", "POST /mcp/pay HTTP/1.1\r\nContent-Length: 0\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		{"headers past the limit", "POST /mcp/pay HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", httploop.MaxHeaderBytes+8192) + "\r\n\r\n", "HTTP/1.1 431 Request Header Fields Too Large"},
		{"HTTP/2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "HTTP/1.1 505 HTTP Version Not Supported"},
		{"an expectation it cannot meet", "POST /mcp/pay HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Length: 2\r\n\r\n{}", "HTTP/1.1 417 Expectation Failed"},
		{"bad chunked body", "POST /mcp/pay HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "HTTP/1.1 400 Bad Request"},
		{"two content lengths", "POST /mcp/pay HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}", "HTTP/1.1 400 Bad Request"},
		// What the proxy accepts (docs/mcp.md) and the upstream here (the
		// Go SDK) would not refuse itself.
		{"a GET with a body", "GET /mcp/pay HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", "HTTP/1.1 400 Bad Request"},
		{"a DELETE with a chunked body", "DELETE /mcp/pay HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		{"an upgrade", "GET /mcp/pay HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		{"an Mcp header spelled with '_'", "GET /mcp/pay HTTP/1.1\r\nHost: x\r\nMcp_Session_Id: s\r\n\r\n", "HTTP/1.1 400 Bad Request"},
		{"a charset other than UTF-8", "POST /mcp/pay HTTP/1.1\r\nHost: x\r\nContent-Type: application/json; charset=utf-7\r\nContent-Length: 2\r\n\r\n{}", "HTTP/1.1 415 Unsupported Media Type"},
		{"a Content-Encoding", "POST /mcp/pay HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: 2\r\n\r\n{}", "HTTP/1.1 415 Unsupported Media Type"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := rawExchange(t, rig.proxy, tc.raw, 5*time.Second)
			if !strings.HasPrefix(got, tc.want) {
				t.Fatalf("got %q, want it to start with %q", got, tc.want)
			}
		})
	}
	// A request that keeps the connection and one with headers it never
	// ends: the first is answered, the second closed at --read-header-timeout.
	slow := rawExchange(t, rig.proxy, "POST /mcp/pay HTTP/1.1\r\nHost: "+u.Host+"\r\nX-Slow: ", 10*time.Second)
	if slow != "" {
		t.Fatalf("unfinished headers got %q", slow)
	}
	if got := up.stats(t).Calls; len(got) != 0 {
		t.Fatalf("the server saw calls %v", got)
	}
}

// A body framed two ways (Content-Length and chunked) is read as net/http
// reads it, chunked, and what is decided is what is forwarded: the pay
// call hidden in the chunks is denied and never reaches the server.
func TestMCPServerDecidesWhatItForwardsWhateverTheFraming(t *testing.T) {
	up := startMCPServer(t)
	rig := startMCPRig(t, up.endpoint("2026-07-28"), mcptest.Bundle(), nil)
	u, _ := url.Parse(rig.proxy)
	hidden := callBody("pay", `{"amount":5000}`)
	decoy := callBody("read_file", `{"path":"a"}`)
	raw := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2026-07-28\r\nContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n",
		u.Path, u.Host, len(decoy), len(hidden), hidden)
	got := rawExchange(t, rig.proxy, raw, 5*time.Second)
	if !strings.HasPrefix(got, "HTTP/1.1 200 ") || !strings.Contains(got, "pay-cap") || !strings.Contains(got, `"isError":true`) {
		t.Fatalf("a pay call in a doubly framed body: %q", got)
	}
	if calls := up.stats(t).Calls; len(calls) != 0 {
		t.Fatalf("the server saw %v", calls)
	}
}

func TestMCPServerKeepsConnectionsAsHTTPSays(t *testing.T) {
	up := startMCPServer(t)
	rig := startMCPRig(t, up.endpoint("2026-07-28"), mcptest.Bundle(), nil)
	u, _ := url.Parse(rig.proxy)
	read := callBody("read_file", `{"path":"a"}`)
	pay := callBody("pay", `{"amount":5000}`)

	t.Run("pipelined requests are answered in order on one connection", func(t *testing.T) {
		c, err := net.Dial("tcp", u.Host)
		must(t, err)
		defer c.Close()
		_, err = io.WriteString(c, mcpPost(u.Path, u.Host, pay, "")+mcpPost(u.Path, u.Host, read, ""))
		must(t, err)
		must(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		br := bufio.NewReader(c)
		for i, want := range []string{"pay-cap", "contents of a"} {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("answer %d: %v", i, err)
			}
			body := readAll(t, resp)
			if resp.StatusCode != http.StatusOK || !strings.Contains(body, want) {
				t.Fatalf("answer %d: %d %s, want %s", i, resp.StatusCode, body, want)
			}
		}
	})
	t.Run("Expect: 100-continue is honoured", func(t *testing.T) {
		c, err := net.Dial("tcp", u.Host)
		must(t, err)
		defer c.Close()
		head, body, _ := strings.Cut(mcpPost(u.Path, u.Host, read, "Expect: 100-continue\r\n"), "\r\n\r\n")
		_, err = io.WriteString(c, head+"\r\n\r\n")
		must(t, err)
		must(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		br := bufio.NewReader(c)
		line, err := br.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 100 Continue") {
			t.Fatalf("before the body: %q %v", line, err)
		}
		_, _ = br.ReadString('\n')
		_, err = io.WriteString(c, body)
		must(t, err)
		resp, err := http.ReadResponse(br, nil)
		must(t, err)
		if text := readAll(t, resp); resp.StatusCode != http.StatusOK || !strings.Contains(text, "contents of a") {
			t.Fatalf("after the body: %d %s", resp.StatusCode, text)
		}
	})
	t.Run("an answer that leaves the body unread says Connection: close", func(t *testing.T) {
		// Declared past the proxy's limit: answered 413 before any of it is
		// read, so the agent must not send its next request on this one.
		raw := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", u.Path, u.Host, decide.MaxRequestBytes+1)
		got := rawExchange(t, rig.proxy, raw, 10*time.Second)
		if !strings.HasPrefix(got, "HTTP/1.1 413 ") || !strings.Contains(got, "Connection: close") {
			t.Fatalf("got %q", got)
		}
	})
	t.Run("HTTP/1.0 and Connection: close get one answer and a close", func(t *testing.T) {
		for _, raw := range []string{
			strings.Replace(mcpPost(u.Path, u.Host, read, ""), "HTTP/1.1", "HTTP/1.0", 1),
			mcpPost(u.Path, u.Host, read, "Connection: close\r\n"),
		} {
			got := rawExchange(t, rig.proxy, raw+raw, 10*time.Second)
			if strings.Count(got, "HTTP/1.1 200") != 1 || !strings.Contains(got, "Connection: close") {
				t.Fatalf("got %q", got)
			}
		}
	})
	if got := up.stats(t).Calls; got["read_file"] != 4 || len(got) != 1 {
		t.Fatalf("the server saw %v, want 4 read_file calls", got)
	}
}

// Mcp-Param-* headers (SEP-2243) mirror the arguments a tool's schema
// marks with x-mcp-header. The official SDK client sends them and its
// server checks them; the proxy checks them too, before anything behind it
// can route on a header that disagrees with the call it decided.
func TestMCPProxyChecksParamHeaders(t *testing.T) {
	up := startMCPServer(t)
	rig := startMCPRig(t, up.endpoint("2026-07-28"), mcptest.Bundle(), nil)
	u, _ := url.Parse(rig.proxy)
	route := callBody("route", `{"region":"eu","body":"x"}`)

	// Before any tools/list through the proxy (a client that listed before
	// the sidecar restarted, and keeps its list), the proxy lists the
	// upstream's tools itself to learn which argument a header mirrors:
	// the matching header passes, a disagreeing one is refused.
	got := rawExchange(t, rig.proxy, mcpPost(u.Path, u.Host, route, "Mcp-Param-Region: eu\r\nConnection: close\r\n"), 10*time.Second)
	if !strings.HasPrefix(got, "HTTP/1.1 200 ") || !strings.Contains(got, "routed to eu") {
		t.Fatalf("a mirrored header before any tools/list through the proxy: %q", got)
	}
	// A tool the upstream does not list cannot be checked: refused, said
	// why, and not looked for again on the next call.
	nope := callBody("nope", `{"region":"eu"}`)
	for range 2 {
		got = rawExchange(t, rig.proxy, mcpPost(u.Path, u.Host, nope, "Mcp-Param-Region: eu\r\nConnection: close\r\n"), 10*time.Second)
		if !strings.HasPrefix(got, "HTTP/1.1 400 ") || !strings.Contains(got, `does not list tool \"nope\"`) {
			t.Fatalf("a mirrored header for a tool the upstream does not have: %q", got)
		}
	}
	if n := metricValue(t, rig.decisions, `toolgate_sidecar_mcp_schema_lists_total{outcome="listed",upstream="pay"}`); n != 2 {
		t.Fatalf("the proxy listed the upstream's tools %v times, want 2 (for route, and once for nope)", n)
	}

	cs := rig.connect("2026-07-28", nil, nil)
	if names := listTools(t, cs); !strings.Contains(names, "route") {
		t.Fatalf("tools/list: %s", names)
	}
	// The SDK client mirrors region itself; both checks pass.
	if text := resultText(t, callTool(t, cs, "route", map[string]any{"region": "eu", "body": "x"})); text != "routed to eu" {
		t.Fatalf("route through the proxy: %q", text)
	}
	for _, tc := range []struct{ name, header, want string }{
		{"a header that disagrees with the body", "Mcp-Param-Region: us\r\n", "does not match argument"},
		{"a header no argument is mirrored in", "Mcp-Param-Region: eu\r\nMcp-Param-Zone: a\r\n", "mirrors no argument"},
		{"the header given twice", "Mcp-Param-Region: eu\r\nMcp-Param-Region: us\r\n", "may be given once"},
		{"bad base64", "Mcp-Param-Region: =?base64?***?=\r\n", "not valid base64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := rawExchange(t, rig.proxy, mcpPost(u.Path, u.Host, route, tc.header+"Connection: close\r\n"), 10*time.Second)
			if !strings.HasPrefix(got, "HTTP/1.1 400 ") || !strings.Contains(got, tc.want) || !strings.Contains(got, "-32020") {
				t.Fatalf("got %q, want a 400 with %q", got, tc.want)
			}
		})
	}
	// The argument's value, base64-encoded as SEP-2243 allows, passes.
	got = rawExchange(t, rig.proxy, mcpPost(u.Path, u.Host, route, "Mcp-Param-Region: =?base64?ZXU=?=\r\nConnection: close\r\n"), 10*time.Second)
	if !strings.HasPrefix(got, "HTTP/1.1 200 ") || !strings.Contains(got, "routed to eu") {
		t.Fatalf("a base64 header that matches: %q", got)
	}
	if calls := up.stats(t).Calls; calls["route"] != 3 || len(calls) != 1 {
		t.Fatalf("the server saw %v, want route three times (before any list, the SDK's call, the base64 one)", calls)
	}
}

// rawUpstream answers each request it reads on a connection by calling
// answer with the connection: an HTTP peer whose bytes and their timing
// the test sets exactly, which no real server lets a test choose.
func rawUpstream(t *testing.T, answer func(c net.Conn, r *http.Request)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					_, _ = io.Copy(io.Discard, req.Body)
					answer(c, req)
				}
			}()
		}
	}()
	return "http://" + ln.Addr().String() + "/mcp"
}

// The proxy relays an answer as it arrives: what the upstream has sent
// reaches the agent before the rest comes (an event stream is never held
// back), and an answer already whole when it arrives goes out whole, framed
// by its length, in one piece rather than a chunk and then an end.
func TestMCPProxyRelaysAnswersAsTheyArrive(t *testing.T) {
	event := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ok\"}]}}\n\n"
	head := "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
	chunk := fmt.Sprintf("%x\r\n%s\r\n", len(event), event)
	post := func(t *testing.T, proxy string) (*http.Response, *bufio.Reader) {
		u, _ := url.Parse(proxy)
		c, err := net.Dial("tcp", u.Host)
		must(t, err)
		t.Cleanup(func() { _ = c.Close() })
		_, err = io.WriteString(c, mcpPost(u.Path, u.Host, callBody("read_file", `{"path":"a"}`), ""))
		must(t, err)
		must(t, c.SetReadDeadline(time.Now().Add(10*time.Second)))
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		must(t, err)
		return resp, br
	}

	// The proxy lists the tools itself to check the call's argument keys
	// against read_file's schema (argkeys.go): answered here at once.
	list := "{\"jsonrpc\":\"2.0\",\"id\":\"toolgate-schemas\",\"result\":{\"tools\":[{\"name\":\"read_file\",\"inputSchema\":{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"}}}}]}}"
	listed := func(c net.Conn, r *http.Request) bool {
		if r.Header.Get("Mcp-Method") != "tools/list" {
			return false
		}
		_, _ = fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(list), list)
		return true
	}
	t.Run("whole on arrival: one piece, framed by length", func(t *testing.T) {
		up := rawUpstream(t, func(c net.Conn, r *http.Request) {
			if !listed(c, r) {
				_, _ = io.WriteString(c, head+chunk+"0\r\n\r\n")
			}
		})
		rig := startMCPRig(t, up, mcptest.Bundle(), nil)
		resp, _ := post(t, rig.proxy)
		body := readAll(t, resp)
		if resp.ContentLength != int64(len(event)) || len(resp.TransferEncoding) != 0 || body != event {
			t.Fatalf("got Content-Length %d, Transfer-Encoding %v, body %q; want the event framed by its length, %d bytes",
				resp.ContentLength, resp.TransferEncoding, body, len(event))
		}
	})
	t.Run("a stream reaches the agent event by event", func(t *testing.T) {
		release := make(chan struct{})
		up := rawUpstream(t, func(c net.Conn, r *http.Request) {
			if listed(c, r) {
				return
			}
			_, _ = io.WriteString(c, head+chunk)
			<-release
			_, _ = io.WriteString(c, chunk+"0\r\n\r\n")
		})
		rig := startMCPRig(t, up, mcptest.Bundle(), nil)
		defer close(release)
		resp, _ := post(t, rig.proxy)
		if len(resp.TransferEncoding) == 0 {
			t.Fatalf("a stream still open upstream was framed by length (%d): the proxy waited for its end", resp.ContentLength)
		}
		got := make([]byte, len(event))
		if _, err := io.ReadFull(resp.Body, got); err != nil || string(got) != event {
			t.Fatalf("the first event, while the upstream holds the rest: %q, %v", got, err)
		}
	})
}

// When the proxy's own tools/list fails (the upstream errs, or answers
// what is not a tools list), the call's Mcp-Param-* header cannot be
// checked: the call is refused, never forwarded unchecked, and the listing
// counted by its outcome.
func TestMCPProxyRefusesParamHeadersItCannotCheck(t *testing.T) {
	for _, tc := range []struct{ name, answer, outcome string }{
		{"a 500", "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\noops", "failed"},
		{"JSON that is no list", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 17\r\n\r\n{\"tools\":\"nope\"}\n", "listed"},
		{"not JSON at all", "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n\r\nhi\n", "failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := make(chan struct{}, 16)
			up := rawUpstream(t, func(c net.Conn, _ *http.Request) { calls <- struct{}{}; _, _ = io.WriteString(c, tc.answer) })
			rig := startMCPRig(t, up, mcptest.Bundle(), nil)
			u, _ := url.Parse(rig.proxy)
			got := rawExchange(t, rig.proxy, mcpPost(u.Path, u.Host, callBody("route", `{"region":"eu"}`), "Mcp-Param-Region: eu\r\nConnection: close\r\n"), 10*time.Second)
			if !strings.HasPrefix(got, "HTTP/1.1 400 ") || !strings.Contains(got, "could not be read") {
				t.Fatalf("got %q, want a 400 saying the header cannot be checked", got)
			}
			if len(calls) != 1 {
				t.Fatalf("the upstream got %d requests, want only the proxy's own tools/list", len(calls))
			}
			series := `toolgate_sidecar_mcp_schema_lists_total{outcome="` + tc.outcome + `",upstream="pay"}`
			if n := metricValue(t, rig.decisions, series); n != 1 {
				t.Fatalf("%s = %v, want 1", series, n)
			}
		})
	}
}
