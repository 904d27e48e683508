package decide

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/engine"
)

// AskOptions is how a caller settles an ask decision (Resolve).
type AskOptions struct {
	// Approval names an ApprovalRequest the caller was given for this
	// call by an earlier ask: the call is decided against it.
	Approval string
	// Wait holds the answer up to this long for a person's decision (0:
	// answer ask at once); never past the request's expiry.
	Wait time.Duration
	// Progress, when set, is told how long the call has waited, every
	// ProgressEvery while it waits.
	Progress      func(waited time.Duration)
	ProgressEvery time.Duration
}

// SetApprovals gives d the store where asked calls wait (nil: none, and
// every ask is denied APPROVAL_UNAVAILABLE). Set before serving.
func (d *Decider) SetApprovals(a Approvals) { d.approvals = a }

// changed is closed, and replaced, at every swap of the state served
// (Serve, SetServiceAccount): a held call decides again then, so that a
// freeze or a policy that now denies ends its wait at once.
func (d *Decider) stateChanged() <-chan struct{} {
	d.changedMu.Lock()
	defer d.changedMu.Unlock()
	if d.changed == nil {
		d.changed = make(chan struct{})
	}
	return d.changed
}

func (d *Decider) broadcastState() {
	d.changedMu.Lock()
	defer d.changedMu.Unlock()
	if d.changed != nil {
		close(d.changed)
		d.changed = nil
	}
}

// Resolve settles res when it is an ask (anything else is returned as it
// is): against the approval o names, or by asking (an ApprovalRequest, or
// the one an identical call has pending), then, with o.Wait, by waiting
// for a person. It returns the answer, the state it was decided with, and
// how long it waited. An approved call is let through once, and only
// while the bundle still asks for it: a policy that now denies, or a
// freeze, wins; an allow needs no approval and uses none. Nothing here
// ever turns an error into an allow.
func (d *Decider) Resolve(ctx context.Context, req engine.Request, res engine.Result, st *State, o AskOptions) (engine.Result, *State, time.Duration) {
	if res.Decision != engine.Ask {
		return res, st, 0
	}
	a := d.approvals
	if a == nil {
		return refuse(res, approval.CodeUnavailable, "this call needs a person's approval, and this sidecar cannot ask for one: it reads no Kubernetes API (a bundle from a file or an offline evaluation); denied"), st, 0
	}
	if st.ServiceAccount == "" {
		return refuse(res, approval.CodeUnavailable, "this call needs a person's approval, and this sidecar does not know its ServiceAccount (--service-account, or credentials of one): an ApprovalRequest names who asked, so that the agent can never approve itself; denied"), st, 0
	}
	call := d.callOf(req, &res, st)
	var t approval.Ticket
	if o.Approval != "" {
		// A sidecar just restarted has not listed the request named yet.
		if err := a.WaitSynced(ctx); err != nil {
			return refuse(res, approval.CodeUnavailable, "this call names ApprovalRequest "+o.Approval+", and the requests could not be listed: "+err.Error()), st, 0
		}
		s := a.Status(o.Approval, &call)
		if s.State != approval.Pending {
			out, st := d.settle(ctx, req, res, st, &call, s)
			return out, st, 0
		}
		t = s.Ticket
	} else {
		var err error
		t, err = a.Ask(ctx, &call)
		switch {
		case errors.Is(err, approval.ErrQueueFull):
			return refuse(res, approval.CodeQueueFull, fmt.Sprintf("this call needs a person's approval, and agent %q already has the most approval requests pending; denied until some are decided", call.AgentID)), st, 0
		case err != nil:
			d.logger.Error("asking for approval failed; denied "+string(approval.CodeUnavailable), "tool", call.Tool, "error", err)
			return refuse(res, approval.CodeUnavailable, "this call needs a person's approval, and the ApprovalRequest could not be written: "+err.Error()), st, 0
		}
		// An identical call's approval, not yet used, lets this one
		// through (the client may have gone away and sent it again).
		if s := a.Status(t.Name, &call); s.State == approval.Approved {
			out, st := d.settle(ctx, req, res, st, &call, s)
			return out, st, 0
		}
	}
	res.Approval = ticketRef(t)
	if o.Wait <= 0 {
		return res, st, 0
	}
	return d.wait(ctx, req, res, st, &call, t, o)
}

// wait holds a pending call until its request is decided or expires, the
// caller's wait ends, the caller goes away, or the state served no longer
// asks for the call.
func (d *Decider) wait(ctx context.Context, req engine.Request, res engine.Result, st *State, call *approval.Call, t approval.Ticket, o AskOptions) (engine.Result, *State, time.Duration) {
	a := d.approvals
	start := time.Now()
	limit := time.NewTimer(min(o.Wait, time.Until(t.ExpiresAt)))
	defer limit.Stop()
	// Progress is first told after a second (the call is held, not
	// merely slow), then every ProgressEvery.
	var tick <-chan time.Time
	var progress *time.Timer
	if o.Progress != nil && o.ProgressEvery > 0 {
		progress = time.NewTimer(min(time.Second, o.ProgressEvery))
		defer progress.Stop()
		tick = progress.C
	}
	for {
		changed, stateChanged := a.Changed(), d.stateChanged()
		if s := a.Status(t.Name, call); s.State != approval.Pending {
			out, st := d.settle(ctx, req, res, st, call, s)
			return out, st, time.Since(start)
		}
		select {
		case <-changed:
		case <-stateChanged:
			if now, st2 := d.Decide(req, false, nil); now.Decision != engine.Ask || !sameAsk(&now, &res) {
				return now, st2, time.Since(start)
			}
		case <-tick:
			o.Progress(time.Since(start))
			progress.Reset(o.ProgressEvery)
		case <-limit.C:
			out := refuse(res, approval.CodeTimeout, fmt.Sprintf("no one approved this call within %v; ApprovalRequest %s/%s stays open until %s", time.Since(start).Round(time.Second), t.Namespace, t.Name, t.ExpiresAt.UTC().Format(time.RFC3339)))
			out.Approval = ticketRef(t)
			return out, st, time.Since(start)
		case <-ctx.Done():
			out := refuse(res, approval.CodeTimeout, "the caller stopped waiting for approval ("+context.Cause(ctx).Error()+")")
			out.Approval = ticketRef(t)
			return out, st, time.Since(start)
		}
	}
}

// settle turns a decided (or unusable) approval into the answer.
func (d *Decider) settle(ctx context.Context, req engine.Request, res engine.Result, st *State, call *approval.Call, s approval.Status) (engine.Result, *State) {
	name := s.Ticket.Namespace + "/" + s.Ticket.Name
	var out engine.Result
	switch s.State {
	case approval.Approved:
		return d.consume(ctx, req, res, s)
	case approval.Denied:
		out = refuse(res, approval.CodeDenied, "denied by "+s.DecidedBy+withMessage(s.Message))
	case approval.Expired:
		out = refuse(res, approval.CodeTimeout, "ApprovalRequest "+name+" expired undecided")
	case approval.Consumed:
		out = refuse(res, approval.CodeInvalid, "ApprovalRequest "+name+" was used already: an approval lets one call through; ask again")
	case approval.Mismatch:
		out = refuse(res, approval.CodeInvalid, "ApprovalRequest "+name+" is not this call's: its agent, tool, server, action or arguments differ, or it shows the approver something else (another preview, rule or reason than this sidecar would write); an approval lets only its own call through")
	default:
		out = refuse(res, approval.CodeInvalid, fmt.Sprintf("no ApprovalRequest %q in this namespace (deleted after its retention, or never made); ask again", s.Ticket.Name))
	}
	if s.State != approval.NotFound {
		out.Approval = ticketRef(s.Ticket)
	}
	return out, st
}

// consume lets an approved call through once: decided again against the
// state served now, it must still be asked for by the same rule. Its
// shared limits are counted in that decision, in one round trip as an
// allowed call's are (a store that cannot count one without failOpen
// denies it USAGE_UNAVAILABLE, and the approval stays unused), and given
// back when the call is not let through after all.
func (d *Decider) consume(ctx context.Context, req engine.Request, asked engine.Result, s approval.Status) (engine.Result, *State) {
	now, st, held := d.decide(req, false, nil, true)
	if now.Decision != engine.Ask {
		return now, st
	}
	letThrough := false
	defer func() {
		if !letThrough {
			d.giveBack(held)
		}
	}()
	if !sameAsk(&now, &asked) {
		return refuse(now, approval.CodeInvalid, fmt.Sprintf("ApprovalRequest %s/%s was approved for rule %q of policy %q, and the bundle now asks by rule %q of policy %q; ask again",
			s.Ticket.Namespace, s.Ticket.Name, asked.MatchedRuleID, asked.MatchedPolicyID, now.MatchedRuleID, now.MatchedPolicyID)), st
	}
	if err := d.approvals.Consume(ctx, s.Ticket.Name); err != nil {
		code := approval.CodeUnavailable
		if errors.Is(err, approval.ErrConsumed) {
			code = approval.CodeInvalid
		}
		out := refuse(now, code, "ApprovalRequest "+s.Ticket.Namespace+"/"+s.Ticket.Name+" could not be used: "+err.Error())
		out.Approval = ticketRef(s.Ticket)
		return out, st
	}
	clock := time.Now
	if d.cfg.Now != nil {
		clock = d.cfg.Now
	}
	if err := d.usage.Count(st.Compiled, req, clock()); err != nil {
		return SelfDeny(CodeUsageUnavailable, err.Error()), st
	}
	letThrough = true
	out := now
	out.Decision, out.Code = engine.Allow, ""
	out.Reason = "approved by " + s.DecidedBy + withMessage(s.Message)
	out.Approval = ticketRef(s.Ticket)
	return out, st
}

// sameAsk: both answers ask by the same rule of the same policy.
func sameAsk(a, b *engine.Result) bool {
	return a.MatchedPolicyID == b.MatchedPolicyID && a.MatchedRuleID == b.MatchedRuleID && a.MatchedPolicyKind == b.MatchedPolicyKind
}

// refuse is res turned into a deny with code and reason, keeping the rule
// that asked.
func refuse(res engine.Result, code engine.Code, reason string) engine.Result {
	res.Decision, res.Effect, res.Code, res.Reason = engine.Deny, engine.EffectDeny, code, reason
	return res
}

func withMessage(m string) string {
	if m == "" {
		return ""
	}
	return ": " + m
}

func ticketRef(t approval.Ticket) *engine.ApprovalRef {
	return &engine.ApprovalRef{Name: t.Name, Namespace: t.Namespace, ExpiresAt: t.ExpiresAt}
}

// callOf is the call an approval for req is bound to, and what the
// approver is shown of it.
func (d *Decider) callOf(req engine.Request, res *engine.Result, st *State) approval.Call {
	timeout := res.ApprovalTimeout
	if timeout <= 0 {
		timeout = approval.DefaultTimeout
	}
	return approval.Call{
		AgentID: StringField(req, engine.FieldAgentID), Tool: StringField(req, engine.FieldToolName),
		Server: StringField(req, engine.FieldServer), Action: StringField(req, engine.FieldAction),
		Digest: approval.Digest(req), ServiceAccount: st.ServiceAccount,
		Preview: d.log.Preview(req, approval.MaxPreview),
		Policy:  res.MatchedPolicyID, Rule: res.MatchedRuleID, PolicyVersion: res.MatchedPolicyVersion,
		Revision: st.Revision, Reason: res.Reason, Timeout: timeout,
	}
}
