package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/toolgate/toolgate/mcp/jsonrpc"
)

// A call can name a tool whose schema the proxy has not seen, with
// arguments whose keys must be checked against it (argkeys.go) or
// Mcp-Param-* headers: its client listed the tools before the sidecar
// restarted, or through another path, and a 2026-07-28 client lists once
// and keeps the list. Refusing such calls until the client lists again
// would refuse them for good. So the proxy lists the upstream's tools
// itself, as the client would (the client's headers and _meta, the
// sidecar's credential), learns the schemas, and then checks the call as
// usual. The stdio guard does the same through the server's stdin
// (stdio_schemas.go).

// learnTimeout bounds the proxy's own listing, all pages included.
const learnTimeout = 5 * time.Second

// maxLearnPages bounds how many pages of tools/list the proxy reads.
const maxLearnPages = 16

// relearnAfter is how long a tool the upstream did not list is not
// looked for again: an agent naming tools that do not exist cannot make
// the proxy list the upstream's tools on every call.
const relearnAfter = 30 * time.Second

// learner lists one upstream's tools for the proxy, one listing at a time.
type learner struct {
	mu     sync.Mutex
	missed map[string]time.Time // tools looked for and not listed, and when
}

// missedRecently tells whether name was looked for and not listed within
// relearnAfter. Callers take turns: the proxy holds l.mu, the stdio guard
// is one goroutine.
func (l *learner) missedRecently(name string) bool {
	at, ok := l.missed[name]
	return ok && time.Since(at) < relearnAfter
}

// miss records that name was looked for and not listed (callers take
// turns, as for missedRecently).
func (l *learner) miss(name string) {
	if l.missed == nil || len(l.missed) >= 1024 {
		l.missed = map[string]time.Time{}
	}
	l.missed[name] = time.Now()
}

// learnToolsFor lists rt's tools when a call names a tool the proxy has
// not seen. Failing, it leaves the schemas as they were: the checks then
// refuse the call, saying why.
func (p *Proxy) learnToolsFor(r *http.Request, rt *mcpRoute, call *jsonrpc.ToolCall) {
	name := *call.Name
	if _, seen := rt.params.tools.Load(name); seen && rt.pins.known(name) {
		return
	}
	l := &rt.learner
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, seen := rt.params.tools.Load(name); seen && rt.pins.known(name) {
		return // listed while this call waited
	}
	if l.missedRecently(name) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), learnTimeout)
	defer cancel()
	cursor := ""
	for range maxLearnPages {
		next, err := listPage(ctx, r, rt, call.RawMeta, cursor)
		if err != nil {
			rt.counted.schemaListFailed.Inc()
			p.log.Warn("listing the MCP upstream's tools to check a call against its tool's schema failed",
				"upstream", rt.up.name, "tool", name, "err", err)
			return
		}
		rt.counted.schemasListed.Inc()
		if _, seen := rt.params.tools.Load(name); seen && rt.pins.known(name) {
			return
		}
		if next == "" {
			break
		}
		cursor = next
	}
	l.miss(name)
}

// listPage sends one tools/list as the agent's request r would have (its
// headers and _meta, the sidecar's credential), and learns the schemas in
// the answer; it returns the answer's nextCursor.
func listPage(ctx context.Context, r *http.Request, rt *mcpRoute, meta json.RawMessage, cursor string) (string, error) {
	params := map[string]any{}
	if len(meta) > 0 {
		params["_meta"] = meta
	}
	if cursor != "" {
		params["cursor"] = cursor
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": learnID, "method": jsonrpc.MethodToolsList, "params": params})
	if err != nil {
		return "", err
	}
	out, err := http.NewRequestWithContext(ctx, http.MethodPost, rt.up.url.String(), bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	for k, v := range r.Header {
		if !strings.HasPrefix(k, paramHeaderPrefix) && k != "Mcp-Name" {
			out.Header[k] = v
		}
	}
	rt.upstreamHeader(out.Header)
	out.Header.Set("Mcp-Method", jsonrpc.MethodToolsList)
	out.Header.Set("Content-Type", "application/json")
	out.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := rt.rp.Transport.RoundTrip(out)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("the upstream answered tools/list with %s", resp.Status)
	}
	next := ""
	learn := func(msg []byte) []byte {
		var page struct {
			ID     json.RawMessage `json:"id"`
			Result struct {
				Tools      []json.RawMessage `json:"tools"`
				NextCursor string            `json:"nextCursor"`
			} `json:"result"`
		}
		if json.Unmarshal(msg, &page) == nil && string(bytes.TrimSpace(page.ID)) == `"`+learnID+`"` {
			for _, t := range page.Result.Tools {
				rt.params.learn(t)
				rt.pins.observe(t)
			}
			next = page.Result.NextCursor
		}
		return msg
	}
	switch mediaType(resp.Header.Get("Content-Type")) {
	case "application/json", "text/event-stream":
	default:
		return "", fmt.Errorf("the upstream answered tools/list as %q", resp.Header.Get("Content-Type"))
	}
	if err := rewriteListAnswer(resp, learn); err != nil {
		return "", err
	}
	// Reading the body is what runs learn (a POST's stream ends once it
	// has answered).
	if _, err := io.Copy(io.Discard, io.LimitReader(resp.Body, maxListBytes)); err != nil {
		return "", err
	}
	return next, nil
}

// learnID is the id of the proxy's own tools/list requests.
const learnID = "toolgate-schemas"
