package sidecar

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/mcptest"
)

// TestMCPProxyRefusesMethodSpellings: only GET, POST, DELETE and OPTIONS
// reach an upstream, GET, DELETE and OPTIONS without a body. A tools/call
// sent as "post", "Post", PUT or PATCH, or in the body of a GET, is
// refused before anything is forwarded, so it never runs on a server that
// matches methods ignoring case or checks none.
//
// The upstreams reproduce two stacks in Go (no .NET runtime here): "pay"
// routes as ASP.NET Core does, whose HttpMethodMatcherPolicy compares the
// method with the endpoint's ignoring case (MapPost answers "post"); "open"
// checks no method at all, as a bare net/http handler or Express's app.all.
// Both run any tools/call they are sent, and count it.
func TestMCPProxyRefusesMethodSpellings(t *testing.T) {
	up := newCallCounter()
	mux := http.NewServeMux()
	mux.HandleFunc("/aspnet", func(w http.ResponseWriter, r *http.Request) {
		up.saw(r.Method)
		if !strings.EqualFold(r.Method, http.MethodPost) {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		up.run(w, r)
	})
	mux.HandleFunc("/any", func(w http.ResponseWriter, r *http.Request) {
		up.saw(r.Method)
		if r.ContentLength == 0 {
			w.WriteHeader(http.StatusNoContent)
			return
		}
		up.run(w, r)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	rig := startMCPRig(t, srv.URL+"/aspnet", mcptest.Bundle(), func(o *Options) {
		o.MCP.Upstreams = append(o.MCP.Upstreams, "open="+srv.URL+"/any")
	})
	dial := tcpDial(t, rig.proxy)
	var refused []string

	// delete_file is denied to every agent: sent any way but a POST, it
	// must not run either.
	for _, method := range []string{"post", "Post", "pOST", "PUT", "PATCH", "PROPFIND", "CONNECT", "HEAD", "TRACE"} {
		for _, upstream := range []string{"pay", "open"} {
			path := fmt.Sprintf("/refused/%s/%s", method, upstream)
			refused = append(refused, path)
			resp, body := exchange(t, dial, agentRequest(method, "/mcp/"+upstream, []string{"Content-Type: application/json"}, toolCall("delete_file", path)))
			what := method + " to " + upstream
			if resp.StatusCode != http.StatusMethodNotAllowed || resp.Header.Get("Allow") != "GET, POST, DELETE, OPTIONS" {
				t.Errorf("%s: %d, Allow %q; want 405 with Allow: GET, POST, DELETE, OPTIONS", what, resp.StatusCode, resp.Header.Get("Allow"))
			} else if method != "HEAD" {
				refusedByToolgate(t, what, resp, body, http.StatusMethodNotAllowed, method)
			}
		}
	}
	chunked := func(s string) string { return fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(s), s) }
	for _, c := range []struct {
		method  string
		headers []string
		body    func(string) string
	}{
		{"GET", nil, func(s string) string { return s }},
		{"GET", []string{"Transfer-Encoding: chunked"}, chunked},
		{"DELETE", nil, func(s string) string { return s }},
		{"DELETE", []string{"Transfer-Encoding: chunked"}, chunked},
		{"OPTIONS", nil, func(s string) string { return s }},
	} {
		path := fmt.Sprintf("/refused/%s-with-a-body/%d", c.method, len(c.headers))
		refused = append(refused, path)
		headers := append([]string{"Content-Type: application/json"}, c.headers...)
		resp, body := exchange(t, dial, agentRequest(c.method, "/mcp/open", headers, c.body(toolCall("delete_file", path))))
		refusedByToolgate(t, fmt.Sprintf("%s with a body %v", c.method, c.headers), resp, body, http.StatusBadRequest, "carries no body")
	}
	if ran := up.ran(); len(ran) != 0 {
		t.Fatalf("the upstream ran %v; every one was refused", ran)
	}

	// What the transport uses still reaches the upstream: bodiless GET,
	// DELETE and OPTIONS, and a POST, decided and logged once.
	for _, method := range []string{"GET", "DELETE", "OPTIONS"} {
		if resp, body := exchange(t, dial, agentRequest(method, "/mcp/open", []string{"Content-Length: 0"}, "")); resp.StatusCode != http.StatusNoContent {
			t.Errorf("%s without a body: %d %s, want the upstream's 204", method, resp.StatusCode, body)
		}
	}
	resp, body := exchange(t, dial, agentRequest("POST", "/mcp/pay", []string{"Content-Type: application/json"}, toolCall("read_file", "/allowed")))
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, "ran read_file") {
		t.Fatalf("POST read_file: %d %s", resp.StatusCode, body)
	}
	if ran := up.ran(); ran["read_file"] != 1 || len(ran) != 1 {
		t.Fatalf("the upstream ran %v, want read_file once", ran)
	}
	// Two POSTs: the call, and the tools/list the proxy sends first to
	// learn read_file's inputSchema (argument keys are checked against it).
	if seen := up.seen(); len(seen) != 4 || seen["GET"] != 1 || seen["DELETE"] != 1 || seen["OPTIONS"] != 1 || seen["POST"] != 2 {
		t.Fatalf("the upstream saw methods %v, want GET, DELETE and OPTIONS once each, and POST twice (the proxy's tools/list, the call)", seen)
	}
	rig.loggedOnce("read_file", "/allowed", refused)
}
