package sidecar

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/decisionlog"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/httploop"
	"github.com/toolgate/toolgate/internal/tracing"
)

// MaxRequestBytes bounds an evaluate request body.
const MaxRequestBytes = decide.MaxRequestBytes

// overloaded answers deny OVERLOADED at once: the sidecar is at one of its
// limits (reason names it) and fails closed rather than queue or allow.
func (s *Server) overloaded(ctx context.Context, w http.ResponseWriter, b *decide.Buffers, ev *decisionlog.Event, reason string) {
	s.writeDeny(ctx, w, b, nil, ev, decide.SelfDeny(CodeOverloaded, reason))
}

func (s *Server) badRequest(w http.ResponseWriter, format string, args ...any) {
	s.d.BadRequest()
	writeError(w, http.StatusBadRequest, fmt.Sprintf(format, args...))
}

// evaluate answers POST /v1/evaluate: a call, or with an output field a
// tool's result (decide.DecideResult: only result rules run, and a redact
// answer carries the output as delivered). Every client mistake is a 400 with a
// JSON error; anything else is a decision, including the sidecar's own
// failures (a recovered panic is deny INTERNAL_ERROR) and overload (deny
// OVERLOADED, at once), so a client never gets a 500, a dropped connection
// or a wait instead of one. With tracing on, the decision's span is the
// child of the caller's traceparent (ctx).
func (s *Server) evaluate(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	ctx := r.Context()
	if tracing.On() {
		ctx = tracing.FromHeader(ctx, r.Header)
	}
	b := s.d.Bodies.Get()
	defer s.d.Bodies.Put(b)
	var req engine.Request
	ev := decisionlog.Event{At: start}
	ev.TraceID, ev.SpanID = decisionlog.TraceOf(r.Header)
	wrote := false
	defer func() {
		if p := recover(); p != nil {
			res := s.d.Failed(p)
			if !wrote {
				s.writeDeny(ctx, w, b, req, &ev, res)
			}
		}
	}()
	explain, ok := s.read(ctx, w, r, b, &ev)
	if !ok {
		wrote = true
		return
	}
	ev.BodyBytes = len(b.In)
	if !s.d.Admit() {
		wrote = true
		s.overloaded(ctx, w, b, &ev, s.d.OverloadReason())
		return
	}
	defer s.d.Done()
	conn := httploop.ConnOf(r)
	if !conn.SetBusy() {
		wrote = true
		s.overloaded(ctx, w, b, &ev, "this connection was closed at the connection cap (--max-connections) before its request was evaluated; denied to fail closed, retry shortly")
		return
	}
	defer conn.SetWaiting()
	req, err := engine.DecodeRequestLimit(b.In, s.opts.MaxRequestElements)
	if err != nil {
		wrote = true
		if errors.Is(err, engine.ErrTooManyElements) {
			s.badRequest(w, "%v; this sidecar's --max-request-elements is %d", err, s.opts.MaxRequestElements)
		} else {
			s.badRequest(w, "%v", err)
		}
		return
	}
	ask, err := askFields(req)
	if err != nil {
		wrote = true
		s.badRequest(w, "%v", err)
		return
	}
	ev.ToolName = decide.StringField(req, engine.FieldToolName)
	if _, isResult := req[engine.FieldOutput]; isResult {
		if err := checkResult(ask); err != nil {
			wrote = true
			s.badRequest(w, "%v", err)
			return
		}
		res, st := s.d.DecideResult(req, explain, &ev)
		s.answer(ctx, w, b, req, &ev, &res, st, &wrote)
		return
	}
	res, st := s.d.Decide(req, explain, &ev)
	if res.Decision == engine.Ask {
		res, st = s.resolveAsk(ctx, w, req, &ev, res, st, ask)
	}
	s.answer(ctx, w, b, req, &ev, &res, st, &wrote)
}

// checkResult refuses a result evaluation (a request carrying output,
// which engine.DecodeRequest checked) with the fields of waiting for a
// person, which only a call has: a tool that already ran cannot be held
// for approval.
func checkResult(ask decide.AskOptions) error {
	if ask.Wait > 0 || ask.Approval != "" {
		return fmt.Errorf("a request carrying %s is a tool's result, judged after it ran: %s and %s are for a call's approval", engine.FieldOutput, FieldWait, FieldApproval)
	}
	return nil
}

// read reads the request body into b.In, answering 400 itself when the
// request is malformed, and deny OVERLOADED when its body would take the
// bodies being read past --max-body-bytes-in-flight.
func (s *Server) read(ctx context.Context, w http.ResponseWriter, r *http.Request, b *decide.Buffers, ev *decisionlog.Event) (explain, ok bool) {
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
	// A declared length frames the body (its reader ends there) and is
	// within the limit, so only an undeclared one needs a MaxBytesReader:
	// an allocation a decision less.
	size, limit, body := -1, MaxRequestBytes, r.Body
	if r.ContentLength >= 0 {
		size, limit = int(r.ContentLength), int(r.ContentLength)
	} else {
		body = http.MaxBytesReader(w, r.Body, MaxRequestBytes)
	}
	err = s.d.Bodies.Read(b, b.In[:0], body, size, limit)
	if err != nil {
		if tooBig := (*http.MaxBytesError)(nil); errors.As(err, &tooBig) {
			s.badRequest(w, "request body is more than the limit of %d bytes", MaxRequestBytes)
		} else if err == decide.ErrBodyBudget {
			// The rest of the body is not read: the connection closes
			// after this answer, which is sent first.
			w.Header().Set("Connection", "close")
			s.overloaded(ctx, w, b, ev, fmt.Sprintf("request bodies being read hold %d of %d bytes (--max-body-bytes-in-flight); denied to fail closed, retry shortly",
				s.d.Bodies.Held(), s.d.Bodies.Budget()))
		} else {
			s.badRequest(w, "reading the request body: %v", err)
		}
		return false, false
	}
	return explain, true
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

// answer writes a decision and commits it to the metrics and the log.
func (s *Server) answer(ctx context.Context, w http.ResponseWriter, b *decide.Buffers, req engine.Request, ev *decisionlog.Event, res *engine.Result, st *decide.State, wrote *bool) {
	ev.ID = s.d.NextID()
	b.Out = s.d.AppendAnswer(b.Out, res, st, ev.ID)
	w.Header()["Content-Type"] = jsonContentType
	*wrote = true
	_, _ = w.Write(b.Out)
	s.d.Commit(ctx, ev, req, res, st.Revision)
}

// writeDeny answers a deny the sidecar made itself (res: decide.SelfDeny
// or decide.Failed), and logs it as a decision. req is nil when it was not
// decoded.
func (s *Server) writeDeny(ctx context.Context, w http.ResponseWriter, b *decide.Buffers, req engine.Request, ev *decisionlog.Event, res engine.Result) {
	wrote := false
	s.answer(ctx, w, b, req, ev, &res, s.d.State(), &wrote)
}
