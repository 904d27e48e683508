// Package local decides tool calls in process, with the engine the
// sidecar embeds and its usage ledger: for Go programs that run no
// sidecar. An Evaluator reads a bundle document or a directory of Policy
// and FrozenAgent manifests; it is a client.Evaluator, so a program can
// switch between it and a client.Client without other changes. It is apart
// from package client because reading manifests needs the Kubernetes
// packages that decode and check them, which an agent asking a sidecar
// should not carry.
package local

import (
	"context"
	"sync"
	"time"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/engine"
)

var _ client.Evaluator = (*Evaluator)(nil)

// Options configure an Evaluator.
type Options struct {
	// BundlePath is a bundle document (`toolgate bundle > bundle.json`,
	// or .gz) or a directory of Policy and FrozenAgent manifests.
	BundlePath string
	// ServiceAccount is the ServiceAccount this program runs as: a
	// FrozenAgent naming it denies every call, as in the sidecar.
	ServiceAccount string
	// Now is the clock frozen-agent expiry, schedules and usage windows
	// read; nil is time.Now. Set it to replay calls at the instants they
	// were made, or in tests.
	Now func() time.Time
}

// Evaluator decides in process with the embedded engine: no sidecar, no
// network, sub-microsecond decisions. It is safe for concurrent use;
// Reload swaps the bundle without stopping Evaluate.
type Evaluator struct {
	opts     Options
	reloadMu sync.Mutex
	// d decides as the sidecar's decision core does (it is one: the same
	// bundle swap, usage ledger and evaluation), with no identity bound and
	// no decision log.
	d *decide.Decider
}

// New loads opts.BundlePath; an unreadable or corrupt bundle is an error.
func New(opts Options) (*Evaluator, error) {
	d, err := decide.NewInProcess(decide.Config{ServiceAccount: opts.ServiceAccount, Now: opts.Now})
	if err != nil {
		return nil, err
	}
	l := &Evaluator{opts: opts, d: d}
	if err := l.Reload(); err != nil {
		return nil, err
	}
	return l, nil
}

// Reload re-reads the bundle and swaps it in at once: every Evaluate sees
// the old bundle or the new one, never a mix. When the bundle is missing
// or corrupt, the error says why and the last good bundle keeps deciding.
func (l *Evaluator) Reload() error {
	l.reloadMu.Lock()
	defer l.reloadMu.Unlock()
	b, err := loadBundle(l.opts.BundlePath)
	if err != nil {
		return err
	}
	if cur := l.d.State(); cur.Compiled != nil && cur.Revision == b.Revision {
		return nil // the same content: nothing to recompile
	}
	compiled, _ := engine.Compile(b)
	l.d.Serve(compiled, b.Revision, l.opts.BundlePath, time.Now())
	return nil
}

// Revision is the revision of the bundle deciding now.
func (l *Evaluator) Revision() string { return l.d.State().Revision }

// Evaluate decides req. The error is non-nil only for a request that
// cannot be decided (an empty ToolName, a field that does not encode as
// JSON), with a deny. An ask rule's call is denied APPROVAL_UNAVAILABLE
// (see EvaluateRequest); req.Wait and req.Approval change nothing here.
func (l *Evaluator) Evaluate(_ context.Context, req client.Request) (client.Result, error) {
	er, err := req.EngineRequest()
	if err != nil {
		r := client.Result{}
		r.Decision, r.Effect, r.Reason = engine.Deny, engine.EffectDeny, err.Error()
		return r, err
	}
	return l.EvaluateRequest(er), nil
}

// EvaluateRequest decides a request already in the engine's form (decoded
// JSON, as engine.DecodeRequest returns): the path that allocates nothing
// beyond the engine's own. A request carrying output (engine.FieldOutput)
// is what a tool returned and is judged by result rules only, as the
// sidecar's /v1/evaluate judges it: a Request whose Extra holds output
// gets the same answer here and from a client.Client.
//
// An Evaluator has no ApprovalRequests to ask a person with, so an ask
// rule's call is settled as a sidecar reading a bundle file settles it
// (decide.Resolve without a store): deny APPROVAL_UNAVAILABLE, with the
// asking rule. A program switching between a Client and an Evaluator then
// gets the same final answer for the same bundle, and never an ask that
// names no approval.
func (l *Evaluator) EvaluateRequest(req engine.Request) client.Result {
	if _, isResult := req[engine.FieldOutput]; isResult {
		return l.judge(req)
	}
	res, st := l.d.Decide(req, false, nil)
	if res.Decision == engine.Ask {
		res, st, _ = l.d.Resolve(context.Background(), req, res, st, decide.AskOptions{})
	}
	// As the sidecar's answer states it: a rule's deny is coded by the
	// rule's id.
	res.Code = res.StatedCode()
	return client.Result{Result: res, BundleRevision: st.Revision}
}

var _ client.ResultEvaluator = (*Evaluator)(nil)

// EvaluateResult judges in process what the tool of req returned, as the
// sidecar's /v1/evaluate does (client.Client.EvaluateResult says how to
// read the result): only result rules run, and a redact decision's Output
// is what to deliver. The error is non-nil only for a request that cannot
// be judged, with a deny.
func (l *Evaluator) EvaluateResult(_ context.Context, req client.Request, toolOutput any) (client.Result, error) {
	er, err := req.ResultFields(toolOutput)
	if err != nil {
		r := client.Result{}
		r.Decision, r.Effect, r.Reason = engine.Deny, engine.EffectDeny, err.Error()
		return r, err
	}
	return l.judge(er), nil
}

// judge judges a result request in the engine's form (it carries output).
func (l *Evaluator) judge(req engine.Request) client.Result {
	res, st := l.d.DecideResult(req, false, nil)
	res.Code = res.StatedCode()
	return client.Result{Result: res, BundleRevision: st.Revision}
}
