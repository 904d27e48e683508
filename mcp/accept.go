package mcp

import (
	"errors"
	"fmt"
	"net/http"
	"net/textproto"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/toolgate/toolgate/internal/httploop"
)

// What the proxy accepts of an agent's request, before anything of it is
// read or forwarded: the framing the MCP transport uses, and nothing that
// an upstream could read as another request than the one decided. Each
// rule closes a way a real server reads what the proxy would not:
//
//   - Methods: exactly GET, POST, DELETE and OPTIONS (the transport's, and
//     a CORS preflight). Only a POST is read and decided; ASP.NET Core's
//     routing matches "post" to a POST endpoint, and a handler that checks
//     no method runs a PUT's body. So any other spelling is 405, and a
//     GET, DELETE or OPTIONS with a body is 400.
//   - A POST body is UTF-8 JSON, as the proxy reads it: Content-Type
//     application/json with no parameter but charset=utf-8, and no
//     Content-Encoding. The TypeScript SDK up to 1.24 decodes a body in
//     the charset it is given (in UTF-7, a string the proxy read can hide
//     a second "name"), and a server's decompression would show it bytes
//     the proxy never saw. Anything else is 415. identity is refused too:
//     RFC 9110 (8.4.1) keeps it out of Content-Encoding, no client sends
//     it, and a server may read it as it reads any other coding.
//   - Header names: WSGI, Rack and CGI read '_' as '-' (HTTP_MCP_NAME is
//     both Mcp-Name and Mcp_Name), so a header that would be an Mcp-*
//     header so read, but is not spelled as one, is never compared with
//     the body: 400.
//   - Upgrades: none. A connection switched to another protocol is one on
//     which the agent talks to the upstream unread, so a request asking
//     for one (an Upgrade header, or upgrade in Connection) is 400, and an
//     upstream's 101 is a 502 (switchedProtocols).

// allowedMethods is the Allow header of a 405.
const allowedMethods = "GET, POST, DELETE, OPTIONS"

// refusal is a request the proxy will not forward, and the answer it gets.
type refusal struct {
	status int
	msg    string
}

// checkRequest refuses what the proxy does not accept of r (above); nil
// when r may be served.
func checkRequest(r *http.Request) *refusal {
	switch r.Method {
	case http.MethodPost:
	case http.MethodGet, http.MethodDelete, http.MethodOptions:
		if r.ContentLength > 0 || len(r.TransferEncoding) > 0 {
			return &refusal{http.StatusBadRequest, fmt.Sprintf("a %s carries no body in the MCP transport; only a POST's body is read and decided, so none other is forwarded", r.Method)}
		}
	default:
		return &refusal{http.StatusMethodNotAllowed, fmt.Sprintf("method %q is not one the MCP transport uses; the proxy serves exactly %s", r.Method, allowedMethods)}
	}
	if _, ok := r.Header["Upgrade"]; ok || httpguts.HeaderValuesContainsToken(r.Header["Connection"], "upgrade") {
		return &refusal{http.StatusBadRequest, "the proxy upgrades no connection (Upgrade, or upgrade in Connection): what is sent on an upgraded connection would reach the upstream undecided"}
	}
	for name := range r.Header {
		if alias, ok := mcpHeaderAlias(name); ok {
			return &refusal{http.StatusBadRequest, fmt.Sprintf("the header %q is read as %s by servers that take '_' for '-' (WSGI, Rack, CGI), but is not compared with the body as %s is; send %s", name, alias, alias, alias)}
		}
	}
	if r.Method == http.MethodPost {
		return checkBodyType(r.Header)
	}
	return nil
}

// mcpHeaderAlias tells a header name that is not an Mcp-* header as
// spelled, but is one with '_' read as '-' and case folded, and returns
// that header's name. Names the request parser made canonical with '-'
// only (Mcp-Name) are the headers themselves, and are not aliases.
func mcpHeaderAlias(name string) (string, bool) {
	if !strings.Contains(name, "_") {
		return "", false
	}
	dashed := strings.ReplaceAll(name, "_", "-")
	if len(dashed) < 4 || !strings.EqualFold(dashed[:4], "mcp-") {
		return "", false
	}
	return textproto.CanonicalMIMEHeaderKey(dashed), true
}

// checkBodyType refuses a POST whose body is not said to be UTF-8 JSON,
// as the proxy reads it: 415.
func checkBodyType(h http.Header) *refusal {
	if _, ok := h["Content-Encoding"]; ok {
		return &refusal{http.StatusUnsupportedMediaType, fmt.Sprintf("the body has Content-Encoding %q; the proxy reads and forwards bodies as sent, so it accepts none", h.Get("Content-Encoding"))}
	}
	types := h.Values("Content-Type")
	if len(types) != 1 {
		return &refusal{http.StatusUnsupportedMediaType, fmt.Sprintf("a POST needs one Content-Type, application/json; it has %d", len(types))}
	}
	if err := utf8JSON(types[0]); err != nil {
		return &refusal{http.StatusUnsupportedMediaType, fmt.Sprintf("Content-Type %q: %v", types[0], err)}
	}
	return nil
}

// utf8JSON accepts exactly application/json, optionally with
// charset=utf-8 (quoted or not; names and values in any case, as RFC 9110
// has them), with optional whitespace around ';'. Any other parameter is
// refused rather than guessed at: a server's reader may act on it, and
// the npm package content-type, for one, keeps the last of two charsets.
func utf8JSON(ct string) error {
	media, params, _ := strings.Cut(ct, ";")
	if !strings.EqualFold(strings.TrimRight(media, " \t"), "application/json") {
		return errors.New("the proxy reads a POST body as JSON, so it accepts only application/json")
	}
	if !strings.Contains(ct, ";") {
		return nil
	}
	name, value, ok := strings.Cut(strings.Trim(params, " \t"), "=")
	if !ok || !strings.EqualFold(name, "charset") {
		return errors.New("the only parameter accepted is charset=utf-8")
	}
	if v, quoted := strings.CutPrefix(value, `"`); quoted {
		if value, quoted = strings.CutSuffix(v, `"`); !quoted {
			return errors.New("the charset's quotes are not closed")
		}
	}
	if !strings.EqualFold(value, "utf-8") {
		return fmt.Errorf("charset %q: the proxy reads the body as UTF-8, as the upstream must, so it accepts only utf-8", value)
	}
	return nil
}

// answer writes the refusal as the agent gets it: a JSON-RPC error.
func (rf *refusal) answer(w http.ResponseWriter) {
	if rf.status == http.StatusMethodNotAllowed {
		w.Header().Set("Allow", allowedMethods)
	}
	writeRPCError(w, rf.status, nil, RPCInvalidRequest, "toolgate: "+rf.msg+"; not forwarded")
}

// refuseSwitch wraps a route's response hook: an upstream's 101 Switching
// Protocols fails the exchange (a 502 from upstreamError) before
// httputil.ReverseProxy, which would hand the agent the upstream's
// connection, sees it. The plain-http forwarder refuses it itself, with
// the same error.
func refuseSwitch(modify func(*http.Response) error) func(*http.Response) error {
	return func(resp *http.Response) error {
		if resp.StatusCode == http.StatusSwitchingProtocols {
			return httploop.ErrSwitchingProtocols
		}
		return modify(resp)
	}
}
