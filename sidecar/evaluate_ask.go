package sidecar

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/decisionlog"
	"github.com/toolgate/toolgate/engine"
)

// Request fields of /v1/evaluate that are about waiting for an approval,
// not about the call: taken out of the request before it is decided, so
// no rule reads them and they are never logged as the call's.
const (
	// FieldWait is how long to hold the answer of a call an ask rule
	// decides (a Go duration, "30s"); at most the rule's timeout.
	FieldWait = "wait"
	// FieldApproval names the ApprovalRequest an earlier ask answer gave:
	// the call is decided against it.
	FieldApproval = "approval"
)

// askFields reads and removes the approval fields of req.
func askFields(req engine.Request) (o decide.AskOptions, err error) {
	if v, ok := req[FieldWait]; ok {
		delete(req, FieldWait)
		s, isString := v.(string)
		if !isString {
			return o, fmt.Errorf("%s must be a Go duration string such as \"30s\", not %s", FieldWait, engine.Stringify(v))
		}
		if o.Wait, err = time.ParseDuration(s); err != nil {
			return o, fmt.Errorf("%s %q is not a Go duration (30s, 5m)", FieldWait, s)
		}
		if o.Wait < 0 {
			return o, fmt.Errorf("%s %q is negative", FieldWait, s)
		}
	}
	if v, ok := req[FieldApproval]; ok {
		delete(req, FieldApproval)
		s, isString := v.(string)
		if !isString || s == "" || len(s) > 253 {
			return o, fmt.Errorf("%s must name an ApprovalRequest (a non-empty string of at most 253 characters), not %s", FieldApproval, engine.Stringify(v))
		}
		o.Approval = s
	}
	return o, nil
}

// resolveAsk settles an ask decision (decide.Resolve). A call held for a
// person gives back its --max-evaluations slot while it waits (waiting
// costs no CPU, and a queue of held calls must not deny everyone else
// OVERLOADED), and its answer's write deadline moves past the wait.
func (s *Server) resolveAsk(ctx context.Context, w http.ResponseWriter, req engine.Request, ev *decisionlog.Event, res engine.Result, st *decide.State, o decide.AskOptions) (engine.Result, *decide.State) {
	o.Wait = min(o.Wait, res.ApprovalTimeout)
	if o.Wait > 0 {
		s.d.Done()
		defer s.d.Reenter()
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(o.Wait + s.opts.WriteTimeout))
	}
	res, st, ev.Waited = s.d.Resolve(ctx, req, res, st, o)
	return res, st
}
