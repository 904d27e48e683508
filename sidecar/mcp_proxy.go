package sidecar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/engine"
)

// mcpProxy serves each upstream MCP server at /mcp/NAME (Streamable HTTP,
// 2025-11-25 and 2026-07-28). Only client POSTs are read: each is buffered
// (within the sidecar's body limits), its tools/call messages decided, and
// the client's bytes forwarded unchanged when every call in it is allowed.
// Everything else (GET streams, DELETE, responses and SSE streams from the
// upstream) is relayed as it arrives: by directForwarder for plain-http
// upstreams, by httputil.ReverseProxy for the rest.
type mcpProxy struct {
	// d decides every tools/call: the proxy's one way to a decision.
	d   *decide.Decider
	log *slog.Logger
	// readTimeout bounds the sending of a POST body (--read-timeout).
	readTimeout time.Duration
	routes      map[string]*mcpRoute
	// static filters tools/list answers (mcp_list.go); streams are the
	// session streams told when that changes.
	static  atomic.Pointer[mcpStatic]
	streams listStreams
	// wasFrozen is whether the bound agent was frozen when lists were last
	// told: a freeze or thaw changes every list.
	wasFrozen atomic.Bool
	// expiry looks again when the next freeze ends by itself
	// (armFreezeExpiry); nil when none is due.
	expiryMu sync.Mutex
	expiry   *time.Timer
	expiryAt time.Time
}

type mcpRoute struct {
	up mcpUpstream
	// direct forwards to a plain-http upstream (mcp_forward.go); nil for
	// the rest, which rp serves.
	direct  *directForwarder
	rp      *httputil.ReverseProxy
	modify  func(*http.Response) error
	fail    func(http.ResponseWriter, *http.Request, error)
	counted mcpCounters
	// learner lists the upstream's tools when a call needs a schema the
	// proxy has not seen (mcp_params_learn.go).
	learner learner
	// params are the x-mcp-header bindings of the upstream's tools, from
	// the tools/list answers relayed (mcp_params.go).
	params paramSchemas
}

// forward sends r upstream and relays the answer.
func (rt *mcpRoute) forward(w http.ResponseWriter, r *http.Request) {
	if rt.direct != nil {
		rt.direct.forward(w, r, rt)
		return
	}
	if info := mcpInfoOf(r.Context()); info != nil {
		info.sent(true)
	}
	rt.rp.ServeHTTP(w, r)
}

const mcpPathPrefix = "/mcp/"

// mcpDialTimeout bounds connecting to an upstream, so a call to a dead
// one fails as a JSON-RPC error quickly rather than hang the agent.
const mcpDialTimeout = 5 * time.Second

func newMCPProxy(d *decide.Decider, ups []mcpUpstream, reg prometheus.Registerer, log *slog.Logger, readTimeout time.Duration) *mcpProxy {
	p := &mcpProxy{d: d, log: log, readTimeout: readTimeout, routes: make(map[string]*mcpRoute, len(ups))}
	requests := newMCPMetrics(reg)
	for _, up := range ups {
		if up.auth != nil {
			up.auth.log = log
		}
		rt := &mcpRoute{up: up, counted: requests.counters(up.name), direct: newDirectForwarder(up.url)}
		rt.modify, rt.fail = p.modifyResponse(rt), p.upstreamError(rt)
		tr := &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: mcpDialTimeout, KeepAlive: 30 * time.Second}).DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          128,
			MaxIdleConnsPerHost:   128,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   mcpDialTimeout,
			ExpectContinueTimeout: time.Second,
			// Nothing is compressed upstream: streams are read event by
			// event (tools/list filtered, list_changed added), and on
			// loopback to the agent compression would only add latency.
			DisableCompression: true,
		}
		rt.rp = &httputil.ReverseProxy{
			Rewrite:        rt.rewrite,
			Transport:      tr,
			ErrorHandler:   rt.fail,
			ModifyResponse: rt.modify,
			// Every write is flushed at once: an event stream, or any
			// answer sent in pieces, reaches the agent as it arrives.
			FlushInterval: -1,
			ErrorLog:      slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		}
		p.routes[up.name] = rt
	}
	return p
}

// rewrite points the request at the upstream, unchanged otherwise (no
// X-Forwarded-*, which Rewrite leaves out), with the sidecar's credential
// in place of any the client sent under that header.
func (rt *mcpRoute) rewrite(pr *httputil.ProxyRequest) {
	u := *rt.up.url
	if pr.In.URL.RawQuery != "" {
		u.RawQuery = pr.In.URL.RawQuery
	}
	pr.Out.URL = &u
	pr.Out.Host = ""
	if rt.up.auth != nil {
		rt.up.auth.apply(pr.Out.Header)
	}
	pr.Out.Header.Del("Accept-Encoding") // see the transport's DisableCompression
}

func (p *mcpProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, mcpPathPrefix)
	rt := p.routes[name]
	if !ok || rt == nil {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no MCP upstream is served at %q; the proxy serves %s", r.URL.Path, p.paths()))
		return
	}
	// A request being proxied, a stream included, is never evicted at
	// --max-connections, as a request being evaluated is not: at the cap a
	// new connection evicts one that is idle or still sending headers.
	conn := connOf(r)
	if !conn.setBusy() {
		return
	}
	defer conn.setWaiting()
	// Streams live as long as the session: only the decision listeners'
	// write timeout would cut them.
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Time{})
	_ = rc.SetReadDeadline(time.Time{})
	if r.Method != http.MethodPost {
		rt.forward(w, r)
		return
	}
	p.post(w, r, rt)
}

// close drops the upstream connections kept alive.
func (p *mcpProxy) close() {
	p.expiryMu.Lock()
	if p.expiry != nil {
		p.expiry.Stop()
		p.expiry = nil
	}
	p.expiryMu.Unlock()
	for _, rt := range p.routes {
		if rt.direct != nil {
			rt.direct.close()
		}
		if tr, ok := rt.rp.Transport.(*http.Transport); ok {
			tr.CloseIdleConnections()
		}
	}
}

func (p *mcpProxy) paths() string {
	var out []string
	for name := range p.routes {
		out = append(out, mcpPathPrefix+name)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// post reads, checks and decides one client POST, then forwards it or
// answers it itself.
func (p *mcpProxy) post(w http.ResponseWriter, r *http.Request, rt *mcpRoute) {
	arrived := requestArrival(w)
	b := &decide.Buffers{}
	defer p.d.Bodies.Release(b)
	body, ok := p.readBody(w, r, b)
	if !ok {
		rt.counted.refused.Inc()
		return
	}
	msgs, batch, err := parseMCPBody(body)
	if err != nil {
		rt.counted.refused.Inc()
		writeRPCError(w, http.StatusBadRequest, nil, rpcInvalidRequest, "toolgate: the body is not JSON-RPC the proxy can read unambiguously: "+err.Error())
		return
	}
	mirrored := paramHeaderNames(r.Header)
	if !batch && msgs[0].call != nil && len(mirrored) > 0 {
		p.learnToolsFor(r, rt, msgs[0].call)
	}
	if err := checkMCPHeaders(r.Header, mirrored, msgs, batch, &rt.params); err != nil {
		rt.counted.refused.Inc()
		var id json.RawMessage
		if !batch {
			id = msgs[0].ID
		}
		writeRPCError(w, http.StatusBadRequest, id, rpcHeaderMismatch, "toolgate: "+err.Error())
		return
	}
	info := &mcpInfo{msgs: msgs, batch: batch, log: p.d, arrived: arrived, held: rt.counted.held}
	defer info.recordAllowed()   // whatever the forwarder did not
	var denied []json.RawMessage // per message: its answer when denied
	anyDenied := false
	for i := range msgs {
		m := &msgs[i]
		switch m.Method {
		case methodToolsCall:
			answer, allowed, logLater := p.decideCall(r, rt, m, len(body))
			if logLater != nil {
				info.allowed = append(info.allowed, logLater)
			}
			if !allowed {
				if denied == nil {
					denied = make([]json.RawMessage, len(msgs))
				}
				denied[i], anyDenied = answer, true
			}
		case methodToolsList:
			if len(m.ID) > 0 {
				info.listIDs = append(info.listIDs, m.ID)
			}
		case methodSubscriptionsListen:
			if !batch && len(m.ID) > 0 && wantsToolListChanges(m.Params) {
				info.listenID = m.ID
			}
		}
	}
	if anyDenied {
		rt.counted.denied.Inc()
		p.answerDenied(w, msgs, denied, batch)
		return
	}
	rt.counted.forwarded.Inc()
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.Header.Del("Transfer-Encoding")
	rt.forward(w, r.WithContext(withMCPInfo(r.Context(), info)))
}

// requestArrival is when w's request began to arrive, in monoNow
// nanoseconds: its first byte read on the proxy's own listener, and now on
// the Unix socket, which net/http serves.
func requestArrival(w http.ResponseWriter) int64 {
	if a, ok := w.(interface{ arrivedAt() int64 }); ok {
		return a.arrivedAt()
	}
	return monoNow()
}

// readBody reads a POST body within the sidecar's own limits: at most
// MaxRequestBytes, bodies past a pooled buffer held against
// --max-body-bytes-in-flight, and --read-timeout to send it.
func (p *mcpProxy) readBody(w http.ResponseWriter, r *http.Request, b *decide.Buffers) ([]byte, bool) {
	if r.ContentLength > MaxRequestBytes {
		writeRPCError(w, http.StatusRequestEntityTooLarge, nil, rpcInvalidRequest,
			fmt.Sprintf("toolgate: the body is %d bytes, more than the proxy's limit of %d", r.ContentLength, MaxRequestBytes))
		return nil, false
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(p.readTimeout))
	defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	size, limit := -1, MaxRequestBytes
	if r.ContentLength >= 0 {
		size, limit = int(r.ContentLength), int(r.ContentLength)
	}
	err := p.d.Bodies.Read(b, nil, http.MaxBytesReader(w, r.Body, MaxRequestBytes), size, limit)
	if err == nil {
		return b.In, true
	}
	switch tooBig := (*http.MaxBytesError)(nil); {
	case errors.As(err, &tooBig):
		writeRPCError(w, http.StatusRequestEntityTooLarge, nil, rpcInvalidRequest, fmt.Sprintf("toolgate: the body is more than the proxy's limit of %d bytes", MaxRequestBytes))
	case err == decide.ErrBodyBudget:
		w.Header().Set("Connection", "close")
		writeRPCError(w, http.StatusServiceUnavailable, nil, rpcOverloaded,
			fmt.Sprintf("toolgate: request bodies being read hold %d of %d bytes (--max-body-bytes-in-flight); not forwarded, retry shortly", p.d.Bodies.Held(), p.d.Bodies.Budget()))
	default:
		writeRPCError(w, http.StatusBadRequest, nil, rpcInvalidRequest, "toolgate: reading the body: "+err.Error())
	}
	return nil, false
}

// checkMCPHeaders refuses a POST whose Mcp-Method, Mcp-Name or Mcp-Param-*
// header disagrees with its body: whatever routes or authorizes on the
// headers (the upstream, a gateway behind it) must see the call that was
// decided. mirrored are its Mcp-Param-* headers (paramHeaderNames);
// params are the upstream's tools' x-mcp-header bindings.
func checkMCPHeaders(h http.Header, mirrored []string, msgs []mcpMessage, batch bool, params *paramSchemas) error {
	methods, names := h.Values("Mcp-Method"), h.Values("Mcp-Name")
	if len(methods) > 1 || len(names) > 1 {
		return errors.New("Mcp-Method and Mcp-Name may each be given once")
	}
	if batch {
		if len(methods)+len(names) > 0 || len(mirrored) > 0 {
			return errors.New("a batch cannot carry Mcp-Method, Mcp-Name or Mcp-Param-* headers: they describe one message")
		}
		return nil
	}
	m := msgs[0]
	if len(methods) == 1 && methods[0] != m.Method {
		return fmt.Errorf("the Mcp-Method header %q does not match the body's method %q; refused so the call decided is the call run", methods[0], m.Method)
	}
	if m.Method != methodToolsCall {
		if len(mirrored) > 0 {
			return fmt.Errorf("Mcp-Param-* headers mirror a tools/call's arguments; this is %q", m.Method)
		}
		return nil
	}
	if m.call == nil {
		return nil // decideCall refuses it
	}
	if len(names) == 1 {
		hname, err := decodeHeaderName(names[0])
		if err != nil {
			return err
		}
		if hname != *m.call.Name {
			return fmt.Errorf("the Mcp-Name header %q does not match the body's tool %q; refused so the call decided is the call run", hname, *m.call.Name)
		}
	}
	return params.check(h, mirrored, m.call)
}

// JSON-RPC error codes the proxy answers with.
const (
	rpcInvalidRequest = -32600
	rpcInternalError  = -32603
	rpcHeaderMismatch = -32020 // the MCP SDKs' code for a header that disagrees with the body
	rpcUpstreamDown   = -32001
	rpcOverloaded     = -32002
	rpcNotForwarded   = -32003
)

func writeRPCError(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	w.Header()["Content-Type"] = jsonContentType
	w.WriteHeader(status)
	_, _ = w.Write(append(appendRPCError(nil, id, code, msg), '\n'))
}

func appendRPCError(dst []byte, id json.RawMessage, code int, msg string) []byte {
	dst = append(dst, `{"jsonrpc":"2.0","id":`...)
	if len(id) == 0 {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, id...)
	}
	dst = append(dst, `,"error":{"code":`...)
	dst = fmt.Appendf(dst, "%d", code)
	dst = append(dst, `,"message":`...)
	dst = engine.AppendJSONString(dst, msg)
	return append(dst, "}}"...)
}

// upstreamError answers a request the upstream did not answer: a JSON-RPC
// error for each request in a POST (the agent's call fails, visibly), a
// 502 otherwise.
func (p *mcpProxy) upstreamError(rt *mcpRoute) func(http.ResponseWriter, *http.Request, error) {
	return func(w http.ResponseWriter, r *http.Request, err error) {
		rt.counted.upstreamError.Inc()
		p.log.Warn("MCP upstream did not answer", "upstream", rt.up.name, "method", r.Method, "err", err)
		msg := fmt.Sprintf("toolgate: MCP upstream %q did not answer: %v", rt.up.name, err)
		if r.Method != http.MethodPost {
			writeRPCError(w, http.StatusBadGateway, nil, rpcUpstreamDown, msg)
			return
		}
		info := mcpInfoOf(r.Context())
		if info == nil {
			writeRPCError(w, http.StatusBadGateway, nil, rpcUpstreamDown, msg)
			return
		}
		var out [][]byte
		for _, m := range info.msgs {
			if len(m.ID) > 0 && m.Method != "" {
				out = append(out, appendRPCError(nil, m.ID, rpcUpstreamDown, msg))
			}
		}
		switch {
		case len(out) == 0:
			writeRPCError(w, http.StatusBadGateway, nil, rpcUpstreamDown, msg)
		case !info.batch:
			w.Header()["Content-Type"] = jsonContentType
			_, _ = w.Write(append(out[0], '\n'))
		default:
			w.Header()["Content-Type"] = jsonContentType
			_, _ = w.Write(append(append([]byte{'['}, bytes.Join(out, []byte{','})...), "]\n"...))
		}
	}
}
