package sidecar

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/toolgate/toolgate/engine"
)

// MaxRequestBytes bounds an evaluate request body.
const MaxRequestBytes = 1 << 20

// maxPooledBuffer keeps one huge request from pinning a megabyte per pooled
// buffer forever.
const maxPooledBuffer = 64 << 10

// buffers are the per-request scratch space: the body as read and the
// response as encoded, both reused across requests.
type buffers struct {
	in  []byte
	out []byte
	// reserved is what in holds of --max-body-bytes-in-flight: its
	// capacity once that is past maxPooledBuffer, else 0.
	reserved int64
	// probe is one byte of scratch for readBody to see the end of a body
	// that fills in exactly.
	probe [1]byte
}

// putBuffers releases the request's body reservation and pools b, unless
// a buffer grew past maxPooledBuffer: then it is left to the collector, so
// idle memory does not stay at the high-water mark.
func (s *Server) putBuffers(b *buffers) {
	if b.reserved > 0 {
		s.bodyBytes.Add(-b.reserved)
		b.reserved = 0
	}
	if cap(b.in) > maxPooledBuffer || cap(b.out) > maxPooledBuffer {
		return
	}
	s.bufs.Put(b)
}

// reserveBody is asked before b.in grows to newCap bytes. Buffers up to
// maxPooledBuffer are free (at most one per connection, bounded by
// --max-connections); past it the request holds its whole capacity against
// --max-body-bytes-in-flight, and is refused when that would exceed it.
func (s *Server) reserveBody(b *buffers, newCap int) bool {
	if newCap <= maxPooledBuffer {
		return true
	}
	need := int64(newCap) - b.reserved
	for {
		held := s.bodyBytes.Load()
		if held+need > s.bodyBudget {
			return false
		}
		if s.bodyBytes.CompareAndSwap(held, held+need) {
			b.reserved = int64(newCap)
			if s.onBodyReserve != nil {
				s.onBodyReserve(held + need)
			}
			return true
		}
	}
}

// overloaded answers deny OVERLOADED at once: the sidecar is at one of its
// limits (flag names it) and fails closed rather than queue or allow.
func (s *Server) overloaded(w http.ResponseWriter, b *buffers, ev *event, reason string) {
	s.writeDeny(w, b, nil, ev, CodeOverloaded, reason+"; denied to fail closed, retry shortly")
}

func (s *Server) badRequest(w http.ResponseWriter, format string, args ...any) {
	s.metrics.badRequests.Inc()
	writeError(w, http.StatusBadRequest, fmt.Sprintf(format, args...))
}

// evaluate answers POST /v1/evaluate. Every client mistake is a 400 with a
// JSON error; anything else is a decision, including the sidecar's own
// failures (a recovered panic is deny INTERNAL_ERROR) and overload (deny
// OVERLOADED, at once), so a client never gets a 500, a dropped connection
// or a wait instead of one.
func (s *Server) evaluate(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	b := s.bufs.Get().(*buffers)
	defer s.putBuffers(b)
	var req engine.Request
	ev := event{at: start}
	ev.traceID, ev.spanID = traceOf(r.Header)
	wrote := false
	defer func() {
		if p := recover(); p != nil {
			s.internalError(w, b, req, &ev, wrote, p)
		}
	}()
	explain, ok := s.read(w, r, b, &ev)
	if !ok {
		wrote = true
		return
	}
	ev.bodyBytes = len(b.in)
	// Decoding and evaluating are what cost CPU and memory; past the cap a
	// request is denied rather than queued, so a flood cannot build a
	// backlog that delays every later decision.
	if s.evaluating.Add(1) > s.maxEvaluating {
		s.evaluating.Add(-1)
		wrote = true
		s.overloaded(w, b, &ev, fmt.Sprintf("the sidecar is deciding %d requests already (--max-evaluations)", s.maxEvaluating))
		return
	}
	defer s.evaluating.Add(-1)
	conn := connOf(r)
	if !conn.setBusy() {
		wrote = true
		s.overloaded(w, b, &ev, "this connection was closed at the connection cap (--max-connections) before its request was evaluated")
		return
	}
	defer conn.setWaiting()
	req, err := engine.DecodeRequestLimit(b.in, s.opts.MaxRequestElements)
	if err != nil {
		wrote = true
		if errors.Is(err, engine.ErrTooManyElements) {
			s.badRequest(w, "%v; this sidecar's --max-request-elements is %d", err, s.opts.MaxRequestElements)
		} else {
			s.badRequest(w, "%v", err)
		}
		return
	}
	ev.toolName = stringField(req, "tool_name")
	s.decide(w, b, req, explain, &ev, &wrote)
}

// read reads the request body into b.in, answering 400 itself when the
// request is malformed, and deny OVERLOADED when its body would take the
// bodies being read past --max-body-bytes-in-flight.
func (s *Server) read(w http.ResponseWriter, r *http.Request, b *buffers, ev *event) (explain, ok bool) {
	if r.ContentLength > MaxRequestBytes {
		s.badRequest(w, "request body is %d bytes, more than the limit of %d", r.ContentLength, MaxRequestBytes)
		return false, false
	}
	explain, err := explainParam(r)
	if err != nil {
		s.badRequest(w, "%v", err)
		return false, false
	}
	// A declared length is read into a buffer of that size, reserved up
	// front; otherwise the buffer doubles, reserving before each growth.
	size, limit := -1, MaxRequestBytes
	if r.ContentLength >= 0 {
		size, limit = int(r.ContentLength), int(r.ContentLength)
	}
	reserve := func(newCap int) bool { return s.reserveBody(b, newCap) }
	b.in, err = readBody(b.in[:0], http.MaxBytesReader(w, r.Body, MaxRequestBytes), size, limit, b.probe[:], reserve)
	if err != nil {
		if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
			s.badRequest(w, "request body is more than the limit of %d bytes", MaxRequestBytes)
		} else if err == errBodyBudget {
			// The rest of the body is not read: the connection closes
			// after this answer, which is sent first.
			w.Header().Set("Connection", "close")
			s.overloaded(w, b, ev, fmt.Sprintf("request bodies being read hold %d of %d bytes (--max-body-bytes-in-flight)",
				s.bodyBytes.Load(), s.bodyBudget))
		} else {
			s.badRequest(w, "reading the request body: %v", err)
		}
		return false, false
	}
	return explain, true
}

// errBodyBudget ends a read whose buffer would take the request bodies
// being read past --max-body-bytes-in-flight.
var errBodyBudget = errors.New("request bodies in flight are at --max-body-bytes-in-flight")

// readBody appends the whole body to dst, keeping the slice for reuse. The
// buffer grows to size at once when that is known (a Content-Length; -1
// when not), else by doubling, and never past limit: a longer body is r's
// to refuse. Before each growth reserve is asked for the new capacity; a
// refusal ends the read with errBodyBudget, before anything is allocated.
// probe is one byte of scratch to see the end of a body that fills the
// buffer at limit.
func readBody(dst []byte, r io.Reader, size, limit int, probe []byte, reserve func(newCap int) bool) ([]byte, error) {
	for {
		if len(dst) == cap(dst) || size > cap(dst) {
			if cap(dst) >= limit {
				n, err := r.Read(probe)
				switch {
				case n > 0:
					return dst, fmt.Errorf("the body is longer than %d bytes", limit)
				case err == io.EOF:
					return dst, nil
				case err != nil:
					return dst, err
				}
				continue
			}
			newCap := min(max(2*cap(dst), 512, size), limit)
			if !reserve(newCap) {
				return dst, errBodyBudget
			}
			grown := make([]byte, len(dst), newCap)
			copy(grown, dst)
			dst = grown
		}
		n, err := r.Read(dst[len(dst):cap(dst)])
		dst = dst[:len(dst)+n]
		if err != nil {
			if err == io.EOF {
				return dst, nil
			}
			return dst, err
		}
	}
}

func explainParam(r *http.Request) (bool, error) {
	if r.URL.RawQuery == "" {
		return false, nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return false, fmt.Errorf("malformed query string: %v", err)
	}
	v := q.Get("explain")
	if v == "" {
		return false, nil
	}
	on, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("explain=%q: want true or false", v)
	}
	return on, nil
}

func (s *Server) decide(w http.ResponseWriter, b *buffers, req engine.Request, explain bool, ev *event, wrote *bool) {
	res, st := s.evaluateRequest(req, explain, ev)
	out, err := res.AppendJSON(b.out[:0])
	if err != nil {
		panic(fmt.Sprintf("encoding the result: %v", err))
	}
	ev.id = s.nextID.Add(1)
	b.out = s.closeResponse(out, st, ev.id)
	w.Header()["Content-Type"] = jsonContentType
	*wrote = true
	_, _ = w.Write(b.out)
	s.finish(ev, req, &res, st.revision)
}

// evaluateRequest is the one decision path, for /v1/evaluate and for the
// MCP proxy's tools/call alike: the bound agent id, roles and environment
// override the request's, the bundle and freezes held now decide, and an
// allowed call is counted for rate limits and token budgets. The caller
// answers, then records the decision with finish.
func (s *Server) evaluateRequest(req engine.Request, explain bool, ev *event) (engine.Result, *state) {
	s.bind(req, ev)
	if s.beforeEvaluate != nil {
		s.beforeEvaluate(req)
	}
	st := s.state.Load()
	// The service account is the sidecar's own (--service-account, set by
	// the injector from the Pod spec), never the request's.
	res := s.usage.Decide(st.compiled, req, engine.EvalOptions{Explain: explain, MaxTrace: s.opts.MaxTrace,
		ServiceAccount: s.opts.ServiceAccount, Now: s.now})
	if res.TraceTruncated {
		s.metrics.traceTruncated.Inc()
	}
	return res, st
}

// closeResponse replaces the result's closing brace with bundleRevision and
// decisionId.
func (s *Server) closeResponse(out []byte, st *state, id uint64) []byte {
	out = append(out[:len(out)-1], st.suffix...)
	out = strconv.AppendUint(out, id, 36)
	return append(out, "\"}\n"...)
}

func (s *Server) finish(ev *event, req engine.Request, res *engine.Result, revision string) {
	if s.settle(ev, req, res, revision) {
		s.decisions.record(ev)
	}
}

// settle counts a decision in the metrics and completes its event for the
// decision log; false when no decision log is kept. finish records the
// event at once; the MCP proxy records an allowed call's once the call is
// on its way upstream (mcpInfo.recordAllowed).
func (s *Server) settle(ev *event, req engine.Request, res *engine.Result, revision string) bool {
	took := time.Since(ev.at)
	effect := res.StatedEffect()
	s.metrics.observeDecision(res.Decision, res.Code, effect, took)
	if !s.decisions.enabled() {
		return false
	}
	ev.idPrefix = s.idPrefix
	ev.agentID = stringField(req, "agent_id")
	ev.sessionID = stringField(req, "session_id")
	ev.toolUseID = stringField(req, "tool_use_id")
	ev.framework = stringField(req, "framework")
	ev.decision, ev.code, ev.reason = res.Decision, res.Code, res.Reason
	ev.effect, ev.warnings = effect, res.Warnings
	ev.policyID, ev.policyVersion, ev.ruleID = res.MatchedPolicyID, res.MatchedPolicyVersion, res.MatchedRuleID
	ev.revision = revision
	ev.latency = took
	if s.decisions.wantsRequest() {
		ev.req = req
	}
	return true
}

// internalError turns a panic into a deny, so the client still gets a
// decision and fails closed. req is nil when the panic came before the
// request parsed.
func (s *Server) internalError(w http.ResponseWriter, b *buffers, req engine.Request, ev *event, wrote bool, p any) {
	s.metrics.internalErrors.Inc()
	s.log.Error("decision failed; answered deny "+string(CodeInternalError), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	if wrote {
		return
	}
	s.writeDeny(w, b, req, ev, CodeInternalError, "the sidecar failed while deciding; denied to fail closed")
}

// writeDeny answers a deny the sidecar made itself, code saying why, and
// logs it as a decision. req is nil when it was not decoded.
func (s *Server) writeDeny(w http.ResponseWriter, b *buffers, req engine.Request, ev *event, code engine.Code, reason string) {
	res := engine.Result{Decision: engine.Deny, Code: code, Reason: reason}
	st := s.state.Load()
	out, _ := res.AppendJSON(b.out[:0])
	ev.id = s.nextID.Add(1)
	b.out = s.closeResponse(out, st, ev.id)
	w.Header()["Content-Type"] = jsonContentType
	_, _ = w.Write(b.out)
	s.finish(ev, req, &res, st.revision)
}

func stringField(req engine.Request, key string) string {
	s, _ := req[key].(string)
	return s
}
