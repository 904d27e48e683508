package mcp

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
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
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/httploop"
	"github.com/toolgate/toolgate/internal/tracing"
	"github.com/toolgate/toolgate/mcp/jsonrpc"
)

// Proxy serves each upstream MCP server at /mcp/NAME (Streamable HTTP,
// 2025-11-25 and 2026-07-28). Only client POSTs are read: each is buffered
// (within the sidecar's body limits), its tools/call messages decided, and
// the client's bytes forwarded unchanged when every call in it is allowed.
// Everything else the proxy accepts (accept.go: GET streams, DELETE,
// responses and SSE streams from the upstream) is relayed as it arrives:
// by directForwarder for plain-http upstreams, by httputil.ReverseProxy
// for the rest.
type Proxy struct {
	// d decides every tools/call: the proxy's one way to a decision.
	d   *decide.Decider
	log *slog.Logger
	// readTimeout bounds the sending of a POST body (--read-timeout).
	readTimeout time.Duration
	routes      map[string]*mcpRoute
	// static filters tools/list answers (list.go); streams are the
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
	// held are the calls waiting for approval (hold.go).
	held heldCalls
	// maxResult is --max-result-bytes: the most of an answer held to
	// judge its results (result_proxy.go).
	maxResult int
	// drift is where the routes' pinned tools' drifts go (pin_state.go).
	drift driftReport
}

type mcpRoute struct {
	up mcpUpstream
	// direct forwards to a plain-http upstream (httploop.Forwarder); nil for
	// the rest, which rp serves.
	direct  *httploop.Forwarder
	hooks   httploop.Hooks
	rp      *httputil.ReverseProxy
	modify  func(*http.Response) error
	fail    func(http.ResponseWriter, *http.Request, error)
	counted mcpCounters
	// learner lists the upstream's tools when a call needs a schema the
	// proxy has not seen (params_learn.go).
	learner learner
	// params are the x-mcp-header bindings of the upstream's tools, from
	// the tools/list answers relayed (params.go).
	params paramSchemas
	// pins are the upstream's pinned tool definitions (pin_state.go).
	pins pinState
}

// forward sends r upstream and relays the answer.
func (rt *mcpRoute) forward(w http.ResponseWriter, r *http.Request) {
	if rt.direct != nil {
		rt.direct.Forward(w, r, rt.hooks)
		return
	}
	if info := mcpInfoOf(r.Context()); info != nil {
		info.sent(true)
	}
	rt.rp.ServeHTTP(w, r)
}

// PathPrefix is where the proxy serves its upstreams: PathPrefix + NAME.
const PathPrefix = "/mcp/"

// jsonContentType is assigned as-is to response headers, so the hot path
// does not build a new slice per response.
var jsonContentType = []string{"application/json"}

// New makes the proxy of o's upstreams (nil, nil when there are none),
// deciding every tools/call with d; its metrics go to reg. readTimeout
// bounds the sending of a POST body (--read-timeout).
func New(d *decide.Decider, o Options, reg prometheus.Registerer, log *slog.Logger, readTimeout time.Duration) (*Proxy, error) {
	ups, err := o.parse()
	if err != nil || len(ups) == 0 {
		return nil, err
	}
	p := newProxy(d, ups, o.UpstreamRoots, reg, log, readTimeout)
	p.maxResult = o.MaxResultBytes
	return p, nil
}

func newProxy(d *decide.Decider, ups []mcpUpstream, roots *x509.CertPool, reg prometheus.Registerer, log *slog.Logger, readTimeout time.Duration) *Proxy {
	p := &Proxy{d: d, log: log, readTimeout: readTimeout, routes: make(map[string]*mcpRoute, len(ups))}
	requests := newMCPMetrics(reg)
	p.drift = driftReport{log: log, counter: newDriftCounter(reg)}
	for _, up := range ups {
		if up.auth != nil {
			up.auth.log = log
		}
		rt := &mcpRoute{up: up, counted: requests.counters(up.name), direct: httploop.NewForwarder(up.url)}
		rt.pins.upstream, rt.pins.report = up.name, &p.drift
		rt.modify, rt.fail = refuseSwitch(p.modifyResponse(rt)), p.upstreamError(rt)
		rt.hooks = httploop.Hooks{Header: rt.upstreamHeader, Sent: postSent, Modify: rt.modify, Fail: rt.fail}
		tr := &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: httploop.DialTimeout, KeepAlive: 30 * time.Second}).DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          128,
			MaxIdleConnsPerHost:   128,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   httploop.DialTimeout,
			ExpectContinueTimeout: time.Second,
			// Nothing is compressed upstream: streams are read event by
			// event (tools/list filtered, list_changed added), and on
			// loopback to the agent compression would only add latency.
			DisableCompression: true,
		}
		if roots != nil {
			tr.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
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

// upstreamHeader makes an agent's request headers the upstream's: no
// hop-by-hop or forwarding headers, nothing compressed (see the
// transport's DisableCompression), and the sidecar's credential where it
// holds one.
func (rt *mcpRoute) upstreamHeader(h http.Header) {
	httploop.WithoutHopHeaders(h)
	h.Del("Accept-Encoding")
	for _, name := range []string{"X-Forwarded-For", "X-Forwarded-Host", "X-Forwarded-Proto", "Forwarded"} {
		h.Del(name)
	}
	if rt.up.auth != nil {
		rt.up.auth.apply(h)
	}
}

// postSent tells a POST's accounting that it is on its way upstream (or
// failed to be): the log's writer may wake now.
func postSent(ctx context.Context, ok bool) {
	if info := mcpInfoOf(ctx); info != nil {
		info.sent(ok)
	}
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

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name, ok := strings.CutPrefix(r.URL.Path, PathPrefix)
	rt := p.routes[name]
	if !ok || rt == nil {
		body, _ := json.Marshal(map[string]string{"error": fmt.Sprintf("no MCP upstream is served at %q; the proxy serves %s", r.URL.Path, p.paths())})
		w.Header()["Content-Type"] = jsonContentType
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write(append(body, '\n'))
		return
	}
	if rf := checkRequest(r); rf != nil {
		rt.counted.refused.Inc()
		rf.answer(w)
		return
	}
	if err := p.d.State().CheckUpstream(rt.up.name, rt.up.raw); err != nil {
		// The namespace registers its upstreams and this one is not the
		// agent's, or not at this URL: whatever the sidecar's arguments
		// say, nothing reaches it.
		rt.counted.refused.Inc()
		p.log.Warn("MCP upstream refused: not registered for this agent", "upstream", rt.up.name, "err", err)
		writeRPCError(w, http.StatusForbidden, nil, RPCUpstreamUnregistered, fmt.Sprintf("toolgate: MCP upstream %q refused: %v", rt.up.name, err))
		return
	}
	// A request being proxied, a stream included, is held in the MCP
	// connections' own budget (--max-mcp-connections), never evicted there
	// and never taking a slot decisions and probes need.
	conn := httploop.ConnOf(r)
	if err := conn.HoldStream(); err != nil {
		if errors.Is(err, httploop.ErrStreamBudget) {
			body, _ := json.Marshal(map[string]string{"error": "toolgate: " + err.Error()})
			w.Header()["Content-Type"] = jsonContentType
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write(append(body, '\n'))
		}
		return
	}
	defer conn.SetWaiting()
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

// Close drops the upstream connections kept alive.
func (p *Proxy) Close() {
	p.expiryMu.Lock()
	if p.expiry != nil {
		p.expiry.Stop()
		p.expiry = nil
	}
	p.expiryMu.Unlock()
	for _, rt := range p.routes {
		if rt.direct != nil {
			rt.direct.Close()
		}
		if tr, ok := rt.rp.Transport.(*http.Transport); ok {
			tr.CloseIdleConnections()
		}
	}
}

// LogRoutes logs each upstream served at addr, and its credential.
func (p *Proxy) LogRoutes(addr string) {
	for _, rt := range p.routes {
		credential := ""
		if rt.up.auth != nil {
			credential = rt.up.auth.current().name + " from " + rt.up.auth.file
		}
		p.log.Info("serving MCP upstream", "addr", addr, "path", PathPrefix+rt.up.name,
			"upstream", rt.up.url.Redacted(), "credential", credential)
	}
}

func (p *Proxy) paths() string {
	var out []string
	for name := range p.routes {
		out = append(out, PathPrefix+name)
	}
	slices.Sort(out)
	return strings.Join(out, ", ")
}

// post reads, checks and decides one client POST, then forwards it or
// answers it itself.
func (p *Proxy) post(w http.ResponseWriter, r *http.Request, rt *mcpRoute) {
	arrived := requestArrival(w)
	var span trace.Span // the call's span, with tracing on (trace.go)
	if tracing.On() {
		r, span = startCall(r, rt)
		defer span.End()
	}
	b := &decide.Buffers{}
	defer p.d.Bodies.Release(b)
	body, ok := p.readBody(w, r, b)
	if !ok {
		rt.counted.refused.Inc()
		return
	}
	msgs, batch, err := jsonrpc.Parse(body)
	if err != nil {
		rt.counted.refused.Inc()
		writeRPCError(w, http.StatusBadRequest, nil, RPCInvalidRequest, "toolgate: the body is not JSON-RPC the proxy can read unambiguously: "+err.Error())
		return
	}
	if span != nil {
		describeCall(span, msgs, batch)
	}
	mirrored := paramHeaderNames(r.Header)
	for i := range msgs {
		if c := msgs[i].Call; c != nil && (needsSchema(c.Arguments) || (!batch && len(mirrored) > 0) || !rt.pins.known(*c.Name)) {
			p.learnToolsFor(r, rt, c)
		}
	}
	if err := checkMCPHeaders(r.Header, mirrored, msgs, batch, &rt.params); err != nil {
		rt.counted.refused.Inc()
		var id json.RawMessage
		if !batch {
			id = msgs[0].ID
		}
		writeRPCError(w, http.StatusBadRequest, id, RPCHeaderMismatch, "toolgate: "+err.Error())
		return
	}
	info := &mcpInfo{msgs: msgs, batch: batch, log: p.d, arrived: arrived, held: rt.counted.held}
	// Results are judged only when the bundle has result rules: otherwise
	// the calls are not kept and the answer is relayed unread.
	judging := p.d.State().Compiled.HasResultRules()
	defer info.recordAllowed()   // whatever the forwarder did not
	var denied []json.RawMessage // per message: its answer when denied
	anyDenied := false
	for i := range msgs {
		m := &msgs[i]
		switch {
		case decided(m.Method):
			var keep *engine.Request
			if judging && m.Method == jsonrpc.MethodToolsCall && len(m.ID) > 0 {
				keep = new(engine.Request)
			}
			answer, allowed, logLater, refused := p.decideCall(r, rt, m, len(body), keep)
			if refused != "" {
				rt.counted.refused.Inc()
				writeRPCError(w, http.StatusBadRequest, m.ID, RPCInvalidParams, refused)
				return
			}
			if logLater != nil {
				info.allowed = append(info.allowed, logLater)
			}
			if !allowed {
				if denied == nil {
					denied = make([]json.RawMessage, len(msgs))
				}
				denied[i], anyDenied = answer, true
			} else if keep != nil && *keep != nil {
				info.results = append(info.results, &pendingResult{id: m.ID, req: *keep, tool: *m.Call.Name})
			}
		case m.Method == MethodCancelled:
			p.cancelHeld(r, m)
		case m.Method == jsonrpc.MethodToolsList:
			if len(m.ID) > 0 {
				info.listIDs = append(info.listIDs, m.ID)
			}
		case m.Method == jsonrpc.MethodSubscriptionsListen:
			subs, refusal := listenSubjects(m.Params)
			if refusal != "" {
				subs = []subject{{}}
			}
			for _, sub := range subs {
				answer, allowed, logLater, _ := p.decideSubject(r, rt, m, sub, refusal, len(body), nil)
				if logLater != nil {
					info.allowed = append(info.allowed, logLater)
				}
				if !allowed {
					if denied == nil {
						denied = make([]json.RawMessage, len(msgs))
					}
					denied[i], anyDenied = answer, true
					break
				}
			}
			if !batch && len(m.ID) > 0 && jsonrpc.WantsToolListChanges(m.Params) {
				info.listenID = m.ID
			}
		}
	}
	if anyDenied {
		if span != nil {
			span.SetAttributes(attribute.String(AttrOutcome, mcpDenied))
		}
		rt.counted.denied.Inc()
		p.answerDenied(w, msgs, denied, batch)
		return
	}
	rt.counted.forwarded.Inc()
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	r.Header.Del("Transfer-Encoding")
	if span != nil {
		span.SetAttributes(attribute.String(AttrOutcome, mcpForwarded))
		var up trace.Span
		r, up = startUpstream(r, rt)
		defer up.End()
	}
	rt.forward(w, r.WithContext(withMCPInfo(r.Context(), info)))
}

// requestArrival is when w's request began to arrive, in MonoNow
// nanoseconds: its first byte read on the proxy's own listener, and now on
// the Unix socket, which net/http serves.
func requestArrival(w http.ResponseWriter) int64 {
	if a, ok := w.(interface{ ArrivedAt() int64 }); ok {
		return a.ArrivedAt()
	}
	return httploop.MonoNow()
}

// readBody reads a POST body within the sidecar's own limits: at most
// decide.MaxRequestBytes, bodies past a pooled buffer held against
// --max-body-bytes-in-flight, and --read-timeout to send it.
func (p *Proxy) readBody(w http.ResponseWriter, r *http.Request, b *decide.Buffers) ([]byte, bool) {
	if r.ContentLength > decide.MaxRequestBytes {
		writeRPCError(w, http.StatusRequestEntityTooLarge, nil, RPCInvalidRequest,
			fmt.Sprintf("toolgate: the body is %d bytes, more than the proxy's limit of %d", r.ContentLength, decide.MaxRequestBytes))
		return nil, false
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(p.readTimeout))
	defer func() { _ = rc.SetReadDeadline(time.Time{}) }()
	size, limit := -1, decide.MaxRequestBytes
	if r.ContentLength >= 0 {
		size, limit = int(r.ContentLength), int(r.ContentLength)
	}
	err := p.d.Bodies.Read(b, nil, http.MaxBytesReader(w, r.Body, decide.MaxRequestBytes), size, limit)
	if err == nil {
		return b.In, true
	}
	switch tooBig := (*http.MaxBytesError)(nil); {
	case errors.As(err, &tooBig):
		writeRPCError(w, http.StatusRequestEntityTooLarge, nil, RPCInvalidRequest, fmt.Sprintf("toolgate: the body is more than the proxy's limit of %d bytes", decide.MaxRequestBytes))
	case err == decide.ErrBodyBudget:
		w.Header().Set("Connection", "close")
		writeRPCError(w, http.StatusServiceUnavailable, nil, RPCOverloaded,
			fmt.Sprintf("toolgate: request bodies being read hold %d of %d bytes (--max-body-bytes-in-flight); not forwarded, retry shortly", p.d.Bodies.Held(), p.d.Bodies.Budget()))
	default:
		writeRPCError(w, http.StatusBadRequest, nil, RPCInvalidRequest, "toolgate: reading the body: "+err.Error())
	}
	return nil, false
}

// checkMCPHeaders refuses a POST whose Mcp-Method, Mcp-Name or Mcp-Param-*
// header disagrees with its body: whatever routes or authorizes on the
// headers (the upstream, a gateway behind it) must see the call that was
// decided. mirrored are its Mcp-Param-* headers (paramHeaderNames);
// params are the upstream's tools' x-mcp-header bindings.
func checkMCPHeaders(h http.Header, mirrored []string, msgs []jsonrpc.Message, batch bool, params *paramSchemas) error {
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
	if err := checkRequestName(names, &m); err != nil {
		return err
	}
	if m.Method != jsonrpc.MethodToolsCall {
		if len(mirrored) > 0 {
			return fmt.Errorf("Mcp-Param-* headers mirror a tools/call's arguments; this is %q", m.Method)
		}
		return nil
	}
	if m.Call == nil {
		return nil // decideCall refuses it
	}
	if len(names) == 1 {
		hname, err := decodeHeaderName(names[0])
		if err != nil {
			return err
		}
		if hname != *m.Call.Name {
			return fmt.Errorf("the Mcp-Name header %q does not match the body's tool %q; refused so the call decided is the call run", hname, *m.Call.Name)
		}
	}
	return params.check(h, mirrored, m.Call)
}

// JSON-RPC error codes the proxy answers with.
const (
	RPCInvalidRequest = -32600
	RPCInternalError  = -32603
	RPCHeaderMismatch = -32020 // the MCP SDKs' code for a header that disagrees with the body
	RPCUpstreamDown   = -32001
	RPCOverloaded     = -32002
	RPCNotForwarded   = -32003
	// RPCUpstreamUnregistered answers every request to an upstream the
	// namespace does not register for the agent (MCPUpstream, Agent
	// spec.upstreams).
	RPCUpstreamUnregistered = -32004
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
func (p *Proxy) upstreamError(rt *mcpRoute) func(http.ResponseWriter, *http.Request, error) {
	return func(w http.ResponseWriter, r *http.Request, err error) {
		rt.counted.upstreamError.Inc()
		p.log.Warn("MCP upstream did not answer", "upstream", rt.up.name, "method", r.Method, "err", err)
		msg := fmt.Sprintf("toolgate: MCP upstream %q did not answer: %v", rt.up.name, err)
		// A 101 is a 502 whatever the request: the upstream's connection
		// is not the agent's to use (accept.go).
		switched := errors.Is(err, httploop.ErrSwitchingProtocols)
		if switched {
			msg = fmt.Sprintf("toolgate: MCP upstream %q answered 101 Switching Protocols; the proxy upgrades no connection", rt.up.name)
		}
		if r.Method != http.MethodPost || switched {
			writeRPCError(w, http.StatusBadGateway, nil, RPCUpstreamDown, msg)
			return
		}
		info := mcpInfoOf(r.Context())
		if info == nil {
			writeRPCError(w, http.StatusBadGateway, nil, RPCUpstreamDown, msg)
			return
		}
		var out [][]byte
		for _, m := range info.msgs {
			if len(m.ID) > 0 && m.Method != "" {
				out = append(out, appendRPCError(nil, m.ID, RPCUpstreamDown, msg))
			}
		}
		switch {
		case len(out) == 0:
			writeRPCError(w, http.StatusBadGateway, nil, RPCUpstreamDown, msg)
		case !info.batch:
			w.Header()["Content-Type"] = jsonContentType
			_, _ = w.Write(append(out[0], '\n'))
		default:
			w.Header()["Content-Type"] = jsonContentType
			_, _ = w.Write(append(append([]byte{'['}, bytes.Join(out, []byte{','})...), "]\n"...))
		}
	}
}
