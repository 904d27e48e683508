package client

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/usage"
)

// LocalOptions configure a Local evaluator.
type LocalOptions struct {
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

// Local decides in process with the embedded engine: no sidecar, no
// network, sub-microsecond decisions. It is safe for concurrent use;
// Reload swaps the bundle without stopping Evaluate.
type Local struct {
	opts     LocalOptions
	compiled atomic.Pointer[engine.Compiled]
	reloadMu sync.Mutex
	// ledger decides and counts as the sidecar's does (usage.Ledger.Decide).
	ledger *usage.Ledger
}

// NewLocal loads opts.BundlePath; an unreadable or corrupt bundle is an
// error.
func NewLocal(opts LocalOptions) (*Local, error) {
	ledger, err := usage.New(usage.DefaultMaxKeys, usage.DefaultMaxEventsPerKey)
	if err != nil {
		return nil, err
	}
	l := &Local{opts: opts, ledger: ledger}
	if err := l.Reload(); err != nil {
		return nil, err
	}
	return l, nil
}

// Reload re-reads the bundle and swaps it in at once: every Evaluate sees
// the old bundle or the new one, never a mix. When the bundle is missing
// or corrupt, the error says why and the last good bundle keeps deciding.
func (l *Local) Reload() error {
	l.reloadMu.Lock()
	defer l.reloadMu.Unlock()
	b, err := loadBundle(l.opts.BundlePath)
	if err != nil {
		return err
	}
	if cur := l.compiled.Load(); cur != nil && cur.Revision() == b.Revision {
		return nil // the same content: nothing to recompile
	}
	compiled, _ := engine.Compile(b)
	l.compiled.Store(compiled)
	return nil
}

// Revision is the revision of the bundle deciding now.
func (l *Local) Revision() string { return l.compiled.Load().Revision() }

// Evaluate decides req. The error is non-nil only for a request that
// cannot be decided (an empty ToolName, a field that does not encode as
// JSON), with a deny.
func (l *Local) Evaluate(_ context.Context, req Request) (Result, error) {
	if req.ToolName == "" {
		r := Result{}
		r.Decision, r.Effect, r.Reason = engine.Deny, engine.EffectDeny, errNoToolName.Error()
		return r, errNoToolName
	}
	er, err := req.engineRequest()
	if err != nil {
		r := Result{}
		r.Decision, r.Effect, r.Reason = engine.Deny, engine.EffectDeny, err.Error()
		return r, err
	}
	return l.EvaluateRequest(er), nil
}

// EvaluateRequest decides a request already in the engine's form (decoded
// JSON, as engine.DecodeRequest returns): the path that allocates nothing
// beyond the engine's own.
func (l *Local) EvaluateRequest(req engine.Request) Result {
	compiled := l.compiled.Load()
	res := l.ledger.Decide(compiled, req, engine.EvalOptions{ServiceAccount: l.opts.ServiceAccount, Now: l.opts.Now})
	return Result{Result: res, BundleRevision: compiled.Revision()}
}
