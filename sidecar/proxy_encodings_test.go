package sidecar

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/toolgate/toolgate/internal/mcptest"
)

// TestMCPProxyRefusesCharsets: a POST is read as UTF-8 JSON, and only a
// POST that says so reaches the upstream: Content-Type application/json,
// with no parameter but charset=utf-8; no Content-Encoding. Anything else
// is 415, never forwarded, never logged as a decision.
//
// The upstream is the official TypeScript SDK 1.24 (test/upstreams/
// ts-sdk-1.24, installed from its lockfile), whose
// StreamableHTTPServerTransport accepts any Content-Type that contains
// "application/json" and decodes the body with the charset it names
// (raw-body and iconv-lite): in UTF-7, "+...-" is base64 of UTF-16, so
// what the proxy reads as one string argument of read_file the SDK reads
// as a second "name", delete_file, and JSON.parse keeps the last.
func TestMCPProxyRefusesCharsets(t *testing.T) {
	argv, err := mcptest.TSSDKServer()
	if err != nil {
		t.Fatal(err)
	}
	up := startUpstream(t, argv...)
	rig := startMCPRig(t, up.base+"/mcp", mcptest.Bundle(), nil)
	dial := tcpDial(t, rig.proxy)
	accept := "Accept: application/json, text/event-stream"

	// The attack, as the agent writes it: read_file is allowed, and the
	// proxy would decide read_file of "/utf7-N+...-".
	hidden := utf7Base64(`"},"name":"delete_file","arguments":{"path":"/etc/passwd`)
	gzipped := func(s string) string {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		_, _ = zw.Write([]byte(s))
		must(t, zw.Close())
		return b.String()
	}
	plain := func(s string) string { return s }
	var refused []string
	for i, c := range []struct {
		name    string
		headers []string
		// utf7: the call hides delete_file in UTF-7; encode: the body
		// as sent.
		utf7   bool
		encode func(string) string
	}{
		{"UTF-7", []string{"Content-Type: application/json; charset=utf-7"}, true, plain},
		{"UTF-7, quoted, upper case", []string{`Content-Type: application/json; charset="UTF-7"`}, true, plain},
		{"charset twice, UTF-7 last", []string{"Content-Type: application/json; charset=utf-8; charset=utf-7"}, true, plain},
		{"Latin-1", []string{"Content-Type: application/json; charset=latin1"}, false, plain},
		{"UTF-16", []string{"Content-Type: application/json; charset=utf-16le"}, false, plain},
		{"another parameter", []string{"Content-Type: application/json; profile=x"}, false, plain},
		{"text/plain naming application/json", []string{"Content-Type: text/plain; x=application/json"}, false, plain},
		{"a type that contains application/json", []string{"Content-Type: application/json-patch+json"}, false, plain},
		{"no Content-Type", nil, false, plain},
		{"Content-Type twice", []string{"Content-Type: application/json", "Content-Type: text/plain"}, false, plain},
		{"gzip", []string{"Content-Type: application/json", "Content-Encoding: gzip"}, false, gzipped},
		{"gzip, body not compressed", []string{"Content-Type: application/json", "Content-Encoding: gzip"}, false, plain},
		{"identity", []string{"Content-Type: application/json", "Content-Encoding: identity"}, false, plain},
	} {
		path := fmt.Sprintf("/refused-%d", i)
		if c.utf7 {
			path = fmt.Sprintf("/utf7-%d", i)
		}
		refused = append(refused, path)
		arg := path
		if c.utf7 {
			arg += hidden
		}
		resp, text := exchange(t, dial, agentRequest("POST", "/mcp/pay", append([]string{accept}, c.headers...), c.encode(toolCall("read_file", arg))))
		refusedByToolgate(t, c.name, resp, text, http.StatusUnsupportedMediaType, "")
	}
	if ran := up.stats(t).Calls; len(ran) != 0 {
		t.Fatalf("the TypeScript SDK ran %v; every request was refused", ran)
	}

	// What the SDKs' clients send passes, each call decided and logged once.
	for i, ct := range []string{"application/json", "application/json; charset=utf-8", "application/json;charset=UTF-8"} {
		path := fmt.Sprintf("/allowed-%d", i)
		resp, text := exchange(t, dial, agentRequest("POST", "/mcp/pay", []string{accept, "Content-Type: " + ct}, toolCall("read_file", path)))
		if resp.StatusCode != http.StatusOK || !strings.Contains(text, "read_file ran on "+path) {
			t.Fatalf("Content-Type %s: %d %s", ct, resp.StatusCode, text)
		}
		rig.loggedOnce("read_file", path, refused)
	}
	if ran := up.stats(t).Calls; len(ran) != 1 || ran["read_file"] != 3 {
		t.Fatalf("the TypeScript SDK ran %v, want read_file 3 times", ran)
	}
}

// utf7Base64 is s as a UTF-7 shifted sequence: "+", the base64 of its
// UTF-16BE code units without padding, "-" (RFC 2152).
func utf7Base64(s string) string {
	var be []byte
	for _, u := range utf16.Encode([]rune(s)) {
		be = append(be, byte(u>>8), byte(u))
	}
	return "+" + base64.RawStdEncoding.EncodeToString(be) + "-"
}
