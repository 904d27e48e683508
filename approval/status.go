package approval

import (
	"time"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// Status is where the request named stands for call, from the cache (and
// this process's own writes): Mismatch when it is for another call,
// NotFound when there is none.
func (s *Store) Status(name string, call *Call) Status {
	ar := s.get(name)
	if ar == nil {
		return Status{State: NotFound, Ticket: Ticket{Name: name, Namespace: s.namespace}}
	}
	return statusOf(ar, call, s.opts.Now())
}

// statusOf is the state of ar for call at now.
func statusOf(ar *v1alpha1.ApprovalRequest, call *Call, now time.Time) Status {
	st := Status{Ticket: ticketOf(ar)}
	if !callOf(ar).Same(call) || !shows(ar, call) {
		st.State = Mismatch
		return st
	}
	st.State = StateOf(ar, now)
	if st.State == Denied || st.State == Approved {
		st.DecidedBy, st.Message = ar.Status.DecidedBy, ar.Status.Message
	}
	return st
}

// UseGrace is how long past its expiry an approval made in time may still
// be used: the call that waited for it is settled within milliseconds of
// the decision, and one decided in the last of them must not be refused.
// Past it, an approval lets nothing through.
const UseGrace = 30 * time.Second

// StateOf is where ar stands at now, whatever call it is for. Used is
// final; a denial stands; an approval counts only if it was made before the
// request expired (decidedAt is the approver's word), and only until then,
// with UseGrace to spare for a call that waited and was approved in its
// last moment; an undecided request expires.
func StateOf(ar *v1alpha1.ApprovalRequest, now time.Time) State {
	expires := ar.Spec.ExpiresAt.Time
	switch {
	case ar.Status.ConsumedAt != nil:
		return Consumed
	case ar.Status.Decision == v1alpha1.ApprovalDenied:
		return Denied
	case ar.Status.Decision == v1alpha1.ApprovalApproved:
		decided := now
		if ar.Status.DecidedAt != nil {
			decided = ar.Status.DecidedAt.Time
		}
		if decided.After(expires) || now.After(expires.Add(UseGrace)) {
			return Expired
		}
		return Approved
	case ar.Status.Decision != "":
		// The CRD's enum admits no other decision; should one appear, it
		// allows nothing.
		return Denied
	case now.After(expires):
		return Expired
	default:
		return Pending
	}
}

// shows tells whether ar shows the approver what this sidecar would have
// written for call: who asked, the preview, the rule and its reason. Code
// in the agent's Pod may hold the Pod's token, and with it the sidecar's
// create on ApprovalRequests: it could write a request that binds the
// exact call (the digest is no secret) but shows a harmless preview or
// reason, and have it approved. Such a request is for another call. The
// policy version and bundle revision are not compared: any policy change
// would void pending approvals.
func shows(ar *v1alpha1.ApprovalRequest, call *Call) bool { return shownIn(ar) == shownFor(call) }

// shown is what a request shows the approver, beyond the call it binds.
type shown struct{ serviceAccount, preview, policy, rule, reason string }

func shownIn(ar *v1alpha1.ApprovalRequest) shown {
	return shown{ar.Spec.ServiceAccount, ar.Spec.Preview, ar.Spec.Policy, ar.Spec.Rule, ar.Spec.Reason}
}

// shownFor is what the request Ask makes for call shows, as stored.
func shownFor(call *Call) shown {
	return shown{call.ServiceAccount, previewOf(call), call.Policy, call.Rule, stored(call.Reason)}
}

// callOf is the call an ApprovalRequest binds, as far as Same compares.
func callOf(ar *v1alpha1.ApprovalRequest) *Call {
	return &Call{AgentID: ar.Spec.AgentID, Tool: ar.Spec.Tool, Server: ar.Spec.Server, Action: ar.Spec.Action,
		Digest: ar.Spec.ArgumentsDigest}
}

func ticketOf(ar *v1alpha1.ApprovalRequest) Ticket {
	return Ticket{Name: ar.Name, Namespace: ar.Namespace, ExpiresAt: ar.Spec.ExpiresAt.Time}
}
