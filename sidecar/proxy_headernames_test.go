package sidecar

import (
	"fmt"
	"net/http"
	"net/textproto"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/mcptest"
)

// TestMCPProxyRefusesMcpHeaderSpellings: a header whose name, with '_'
// read as '-' and case folded, is an Mcp-* header but is not spelled as
// one (Mcp_Name, mcp_name, Mcp_Param_Path) is refused with 400, never
// forwarded: the proxy compares only Mcp-Name itself with the body, and a
// WSGI, Rack or CGI stack hands the application both spellings under one
// name.
//
// The upstream is test/upstreams/wsgi: a WSGI application on Python's
// wsgiref, which gives "Mcp_Name: delete_file" to the application as
// HTTP_MCP_NAME, as it would "Mcp-Name", and routes the call on it.
func TestMCPProxyRefusesMcpHeaderSpellings(t *testing.T) {
	argv, err := mcptest.WSGIServer()
	if err != nil {
		t.Fatal(err)
	}
	up := startUpstream(t, argv...)
	rig := startMCPRig(t, up.base+"/mcp", mcptest.Bundle(), nil)
	dial := tcpDial(t, rig.proxy)
	ct := "Content-Type: application/json"

	var refused []string
	for i, header := range []string{
		"Mcp_Name: delete_file",
		"mcp_name: delete_file",
		"MCP_NAME: delete_file",
		"Mcp-Name: read_file\r\nMcp_Name: delete_file",
		"Mcp_Method: tools/list",
		"Mcp_Param_Path: /x",
		"Mcp-Param_Path: /x",
		"Mcp_Session_Id: another-session",
		"Mcp_Protocol_Version: 2025-11-25",
	} {
		path := fmt.Sprintf("/refused-%d", i)
		refused = append(refused, path)
		resp, body := exchange(t, dial, agentRequest("POST", "/mcp/pay", []string{ct, header}, toolCall("read_file", path)))
		name, _, _ := strings.Cut(header[strings.LastIndex(header, "\n")+1:], ":")
		refusedByToolgate(t, header, resp, body, http.StatusBadRequest, textproto.CanonicalMIMEHeaderKey(name))
	}
	// Not only on a POST: a GET stream's headers are read the same way.
	resp, body := exchange(t, dial, agentRequest("GET", "/mcp/pay", []string{"Accept: text/event-stream", "Mcp_Session_Id: s"}, ""))
	refusedByToolgate(t, "a GET with Mcp_Session_Id", resp, body, http.StatusBadRequest, "Mcp_session_id")
	if ran := up.stats(t).Calls; len(ran) != 0 {
		t.Fatalf("the WSGI server ran %v; every call was refused", ran)
	}

	// Mcp-Name spelled as it is, checked against the body, passes; so
	// does another header with an underscore, which mirrors nothing.
	for i, header := range []string{"Mcp-Name: read_file", "X_Request_Id: 7"} {
		path := fmt.Sprintf("/allowed-%d", i)
		resp, body := exchange(t, dial, agentRequest("POST", "/mcp/pay", []string{ct, header}, toolCall("read_file", path)))
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, "read_file ran on "+path) {
			t.Fatalf("%s: %d %s", header, resp.StatusCode, body)
		}
		rig.loggedOnce("read_file", path, refused)
	}
	if ran := up.stats(t).Calls; len(ran) != 1 || ran["read_file"] != 2 {
		t.Fatalf("the WSGI server ran %v, want read_file twice", ran)
	}
}
