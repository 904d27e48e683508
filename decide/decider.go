package decide

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"math"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/decisionlog"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/tracing"
	"github.com/toolgate/toolgate/usage"
)

// CodeInternalError is the code of a deny the decider made because it
// failed, not because a policy said so.
const CodeInternalError engine.Code = "INTERNAL_ERROR"

// CodeOverloaded is the code of a deny made because the sidecar was already
// deciding --max-evaluations requests (or holding --max-body-bytes-in-flight
// of bodies): it answers at once rather than queue, and never allows.
const CodeOverloaded engine.Code = "OVERLOADED"

// CodeUsageUnavailable is the code of a deny made because a rate limit or
// token budget could not be counted (usage.ErrUnavailable: the ledger is
// full of counters limits still read, a count it cannot vouch for, or its
// state file cannot be written): an allowed call is never let through
// uncounted.
const CodeUsageUnavailable engine.Code = "USAGE_UNAVAILABLE"

// Config is what a Decider decides with besides the bundle.
type Config struct {
	// AgentID, Roles and Environment are bound into every request in place
	// of what the client sent; "" and nil bind nothing.
	AgentID     string
	Roles       []string
	Environment string
	// ServiceAccount is the agent's own, never the request's.
	ServiceAccount string
	// MaxEvaluations caps the requests being decoded and decided at once;
	// past it a request is denied OVERLOADED at once.
	MaxEvaluations int
	// MaxBodyBytesInFlight bounds what request bodies past a pooled buffer
	// hold while read and decided (Bodies).
	MaxBodyBytesInFlight int
	// MaxRequestElements bounds a decoded request (engine.DecodeRequestLimit).
	MaxRequestElements int
	MaxTrace           int
	// UsageMaxKeys and UsageMaxEventsPerKey bound the usage ledger.
	UsageMaxKeys, UsageMaxEventsPerKey int
	// SharedStore counts the limits with store: shared (--usage-store),
	// nil when the sidecar has none: a call such a limit reaches is then
	// denied USAGE_UNAVAILABLE unless the limit has failOpen.
	SharedStore usage.SharedStore
	// UsageStoreTimeout bounds each round trip to SharedStore
	// (DefaultUsageStoreTimeout when 0); StoreMetrics, when not nil,
	// counts them.
	UsageStoreTimeout time.Duration
	StoreMetrics      *StoreMetrics
	// Now is the clock decisions and usage are decided at (nil: the real one).
	Now func() time.Time
	// BeforeEvaluate lets tests make a decision fail; nil in production.
	BeforeEvaluate func(engine.Request)
	// OnBodyReserve is told the bytes in flight after each body
	// reservation; nil in production.
	OnBodyReserve func(inFlight int64)
}

// Decider is the one decision core (see the package comment).
type Decider struct {
	cfg    Config
	logger *slog.Logger
	state  atomic.Pointer[State]
	// serviceAccount is the one the sidecar runs as (SetServiceAccount),
	// written with the swaps.
	serviceAccount string
	usage          *usage.Ledger
	log            *decisionlog.Log
	metrics        *Metrics
	// Decision ids are a per-process random prefix and a counter.
	idPrefix string
	nextID   atomic.Uint64
	// evaluating counts the requests being decoded and evaluated, up to
	// cfg.MaxEvaluations.
	evaluating atomic.Int64
	// Bodies is the budget of request bodies being read and decided.
	Bodies *BodyBudget
	// approvals is where asked calls wait (SetApprovals); changed is
	// closed at each swap of the state (approve.go).
	approvals Approvals
	changedMu sync.Mutex
	changed   chan struct{}
}

// New makes a Decider serving no bundle (every decision deny NO_POLICIES
// until Serve). Its decisions go to log and are counted in m.
func New(cfg Config, ledger *usage.Ledger, log *decisionlog.Log, m *Metrics, logger *slog.Logger) (*Decider, error) {
	d := &Decider{cfg: cfg, logger: logger, usage: ledger, log: log, metrics: m}
	if d.logger == nil {
		d.logger = slog.Default()
	}
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("seeding decision ids: %w", err)
	}
	d.idPrefix = hex.EncodeToString(rnd[:]) + "-"
	d.serviceAccount = cfg.ServiceAccount
	d.Bodies = &BodyBudget{budget: int64(cfg.MaxBodyBytesInFlight), onReserve: cfg.OnBodyReserve}
	d.Serve(nil, "", "", time.Time{})
	return d, nil
}

// Config is what d decides with.
func (d *Decider) Config() *Config { return &d.cfg }

// Log is the decision log d records to.
func (d *Decider) Log() *decisionlog.Log { return d.log }

// Admit is the guard's cap: decoding and evaluating are what cost CPU and
// memory, so past --max-evaluations a request is denied (Overloaded) rather
// than queued, and a flood cannot build a backlog that delays every later
// decision. Admitted, the caller calls Done when the decision is made.
func (d *Decider) Admit() bool {
	if d.evaluating.Add(1) > int64(d.cfg.MaxEvaluations) {
		d.evaluating.Add(-1)
		return false
	}
	return true
}

// Done ends a decision Admit let in.
func (d *Decider) Done() { d.evaluating.Add(-1) }

// Reenter takes back the slot a decision gave up with Done while it
// waited (for an approval), so that its deferred Done stays balanced; it
// may briefly take the count past the cap, never refusing.
func (d *Decider) Reenter() { d.evaluating.Add(1) }

// OverloadReason is why a request Admit refused is denied.
func (d *Decider) OverloadReason() string {
	return fmt.Sprintf("the sidecar is deciding %d requests already (--max-evaluations); denied to fail closed, retry shortly", d.cfg.MaxEvaluations)
}

// Failed turns a panic recovered while deciding into the deny that answers
// it: counted, logged with its stack, never an allow.
func (d *Decider) Failed(p any) engine.Result {
	d.metrics.InternalErrors.Inc()
	d.logger.Error("decision failed; answered deny "+string(CodeInternalError), "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
	return SelfDeny(CodeInternalError, "the sidecar failed while deciding; denied to fail closed")
}

// unregistered is the deny of every call of a sidecar whose ServiceAccount
// has no Agent in a namespace that registers its agents.
func unregistered(st *State) engine.Result {
	return SelfDeny(engine.CodeAgentUnregistered, fmt.Sprintf(
		"ServiceAccount %q has no Agent in this namespace, whose agents are registered: an admin of the namespace must create an Agent for it", st.ServiceAccount))
}

// SelfDeny is a deny the sidecar made itself, code saying why.
func SelfDeny(code engine.Code, reason string) engine.Result {
	return engine.Result{Decision: engine.Deny, Code: code, Reason: reason}
}

// Decide is the one decision path: the bound agent id, roles and
// environment override the request's, the bundle and freezes held now
// decide, and an allowed call is counted for rate limits and token
// budgets: in the usage ledger, and for limits with store: shared in the
// shared store, one round trip for a call such a limit reaches
// (decideShared). The caller answers, then records the decision with Commit (or
// Settle and Record). ev is the decision log's event, nil when none is kept
// (the in-process evaluator of package client/local).
func (d *Decider) Decide(req engine.Request, explain bool, ev *decisionlog.Event) (engine.Result, *State) {
	res, st, _ := d.decide(req, explain, ev, false)
	return res, st
}

// decide is Decide; approved (consume) counts an ask in the shared store
// as an allow and returns its reservation (decideShared).
func (d *Decider) decide(req engine.Request, explain bool, ev *decisionlog.Event, approved bool) (engine.Result, *State, *sharedCounts) {
	st := d.state.Load()
	d.bind(&st.binding, req, ev)
	if d.cfg.BeforeEvaluate != nil {
		d.cfg.BeforeEvaluate(req)
	}
	if st.binding.unregistered {
		return unregistered(st), st, nil
	}
	// The service account is the sidecar's own (from the API server, or
	// --service-account), never the request's.
	opts := engine.EvalOptions{Explain: explain, MaxTrace: d.cfg.MaxTrace, ServiceAccount: st.ServiceAccount, Now: d.cfg.Now}
	var res engine.Result
	var held *sharedCounts
	var err error
	if st.Compiled.UsesSharedUsage() {
		res, held, err = d.decideShared(st.Compiled, req, opts, approved)
	} else {
		res, err = d.usage.Decide(st.Compiled, req, opts)
	}
	if err != nil {
		res = SelfDeny(CodeUsageUnavailable, err.Error())
	}
	if res.TraceTruncated {
		d.metrics.TraceTruncated.Inc()
	}
	return res, st, held
}

// DecideResult judges what a tool returned: req is the call with its
// output (engine.FieldOutput), bound as Decide binds it, and only result
// rules run; nothing is counted against rate limits or token budgets (the
// call was counted when it was decided). The caller answers (withholding
// or redacting the output as the result says) and records the decision
// with Commit, as for a call.
func (d *Decider) DecideResult(req engine.Request, explain bool, ev *decisionlog.Event) (engine.Result, *State) {
	return d.decideResult(req, explain, ev, false)
}

// DecideResultTruncated is DecideResult for an output the caller could
// not hold whole (the MCP proxy's --max-result-bytes): its text is what
// was held, and every condition on output.text or output.structured holds
// (engine.EvalOptions.OutputTruncated).
func (d *Decider) DecideResultTruncated(req engine.Request, explain bool, ev *decisionlog.Event) (engine.Result, *State) {
	return d.decideResult(req, explain, ev, true)
}

func (d *Decider) decideResult(req engine.Request, explain bool, ev *decisionlog.Event, truncated bool) (engine.Result, *State) {
	st := d.state.Load()
	d.bind(&st.binding, req, ev)
	if ev != nil {
		ev.Phase = engine.PhaseResult
	}
	if st.binding.unregistered {
		return unregistered(st), st
	}
	res := st.Compiled.Evaluate(req, engine.EvalOptions{Explain: explain, MaxTrace: d.cfg.MaxTrace,
		ServiceAccount: st.ServiceAccount, Now: d.cfg.Now, Phase: engine.PhaseResult, OutputTruncated: truncated})
	if res.TraceTruncated {
		d.metrics.TraceTruncated.Inc()
	}
	return res, st
}

// Commit counts a decision in the metrics and records it in the decision
// log at once.
func (d *Decider) Commit(ctx context.Context, ev *decisionlog.Event, req engine.Request, res *engine.Result, revision string) {
	if d.Settle(ctx, ev, req, res, revision) {
		d.log.Record(ev)
	}
}

// Settle counts a decision in the metrics and completes its event for the
// decision log; false when no decision log is kept. Commit records the
// event at once; the MCP proxy records an allowed call's once the call is
// on its way upstream. With tracing on, the decision's span is made here,
// under ctx's span (trace.go): every decision the sidecar answers passes
// here once.
func (d *Decider) Settle(ctx context.Context, ev *decisionlog.Event, req engine.Request, res *engine.Result, revision string) bool {
	took := time.Since(ev.At) - ev.Waited
	effect := res.StatedEffect()
	d.metrics.observeDecision(res.Decision, res.Code, effect, took)
	d.metrics.observeShadow(res.Shadow)
	if tracing.On() {
		d.traceDecision(ctx, ev, res, effect, revision)
	}
	if !d.log.Enabled() {
		return false
	}
	ev.IDPrefix = d.idPrefix
	ev.AgentID = StringField(req, engine.FieldAgentID)
	ev.SessionID = StringField(req, engine.FieldSessionID)
	ev.ToolUseID = StringField(req, engine.FieldToolUseID)
	ev.Framework = StringField(req, engine.FieldFramework)
	ev.Decision, ev.Code, ev.Reason = res.Decision, res.Code, res.Reason
	ev.Effect, ev.Warnings = effect, res.Warnings
	ev.PolicyID, ev.PolicyVersion, ev.RuleID = res.MatchedPolicyID, res.MatchedPolicyVersion, res.MatchedRuleID
	ev.PolicyKind, ev.ExceptionApplied, ev.Shadow = res.MatchedPolicyKind, res.ExceptionApplied, res.Shadow
	if res.Approval != nil {
		ev.Approval = res.Approval.Namespace + "/" + res.Approval.Name
	}
	ev.Explanations, ev.Redactions = res.Explanations, res.Redactions
	ev.ServiceAccount = d.state.Load().ServiceAccount
	ev.Revision = revision
	ev.Latency = took
	if d.log.WantsRequest() {
		ev.Request = req
	}
	return true
}

// Record records an event Settle completed.
func (d *Decider) Record(ev *decisionlog.Event) { d.log.Record(ev) }

// BadRequest counts a request refused before it could be decided.
func (d *Decider) BadRequest() { d.metrics.BadRequests.Inc() }

// StringField is a request's string field, "" when absent or not a string.
func StringField(req engine.Request, key string) string {
	s, _ := req[key].(string)
	return s
}

// NewInProcess is a Decider for a program that decides its own calls (the
// Claude Code hook's local mode, package client/local): the usage ledger
// at its default caps, metrics in a registry of their own, no decision log,
// and no cap on decisions in flight (the caller is the only one asking).
func NewInProcess(cfg Config) (*Decider, error) {
	ledger, err := usage.New(usage.DefaultMaxKeys, usage.DefaultMaxEventsPerKey)
	if err != nil {
		return nil, err
	}
	if cfg.MaxEvaluations == 0 {
		cfg.MaxEvaluations = math.MaxInt32
	}
	reg := prometheus.NewRegistry()
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "decision_log_dropped_total"}, []string{"sink", "reason"})
	return New(cfg, ledger, decisionlog.New(decisionlog.Config{}, dropped, nil), NewMetrics(reg, "toolgate_", ledger), nil)
}
