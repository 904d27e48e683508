package approval

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// syncWait bounds how long Ask waits for the first list of requests: until
// then the cache cannot tell whether the call is pending already, nor how
// many the agent has.
const syncWait = 10 * time.Second

// createTimeout bounds one Ask's list wait and create, whatever its caller.
const createTimeout = 30 * time.Second

// Ask returns the pending ApprovalRequest for call, creating it unless an
// identical call already has one pending, or approved and not yet used
// (Call.Key). ErrQueueFull past the
// per-agent cap of pending requests; any other error means the request
// could not be written (the caller denies APPROVAL_UNAVAILABLE).
func (s *Store) Ask(ctx context.Context, call *Call) (Ticket, error) {
	if call == nil {
		return Ticket{}, errors.New("approval store: Ask without a call")
	}
	key := call.Key()
	// Calls share a flight only if their request would show the same: one
	// made for another rule's reason is not this call's (shows).
	fk := flightKey{key, shownFor(call)}
	s.mu.Lock()
	if f, ok := s.flights[fk]; ok {
		s.mu.Unlock()
		select {
		case <-f.done:
			return f.ticket, f.err
		case <-ctx.Done():
			return Ticket{}, fmt.Errorf("asking for %s in %s: %w", call.Tool, s.namespace, ctx.Err())
		}
	}
	f := &flight{done: make(chan struct{})}
	s.flights[fk] = f
	s.mu.Unlock()

	// The create is the flight's, not this caller's: a caller that goes
	// away (a client cancelling its held call) must not abandon a create
	// the API server may already have done, unseen here until the watch
	// brings it, while an identical call asks again and makes another.
	flightCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), createTimeout)
	defer cancel()
	f.ticket, f.err = s.ask(flightCtx, call, key)
	s.mu.Lock()
	delete(s.flights, fk)
	s.mu.Unlock()
	close(f.done)
	return f.ticket, f.err
}

// ask is the one Ask in this process for key showing what call shows.
func (s *Store) ask(ctx context.Context, call *Call, key string) (Ticket, error) {
	timeout := call.Timeout
	switch {
	case timeout == 0:
		timeout = DefaultTimeout
	case timeout < 0 || timeout > MaxTimeout:
		return Ticket{}, fmt.Errorf("approval store: timeout %s is not within (0, %s]", call.Timeout, MaxTimeout)
	}
	if err := s.waitSynced(ctx); err != nil {
		return Ticket{}, err
	}
	now := s.opts.Now()
	if t, ok := s.pending(call, key, now); ok {
		return t, nil
	}
	// Counting and creating are one step per process, or two calls of one
	// agent could both pass the cap. Replicas count each other's requests
	// through the watch, so across replicas the cap can be passed by the
	// requests in flight at once.
	select {
	case s.creating <- struct{}{}:
		defer func() { <-s.creating }()
	case <-ctx.Done():
		return Ticket{}, fmt.Errorf("asking for %s in %s: %w", call.Tool, s.namespace, ctx.Err())
	}
	agent := AgentKey(call.AgentID)
	if n := s.countPending(call, now); n >= s.opts.MaxPendingPerAgent {
		return Ticket{}, fmt.Errorf("agent %q in %s has %d ApprovalRequests pending (at most %d): %w",
			call.AgentID, s.namespace, n, s.opts.MaxPendingPerAgent, ErrQueueFull)
	}
	ar := newRequest(call, s.namespace, key, agent, now.Add(timeout))
	created := &v1alpha1.ApprovalRequest{}
	err := s.rc.Post().Namespace(s.namespace).Resource(resource).Body(ar).Do(ctx).Into(created)
	if err != nil {
		return Ticket{}, fmt.Errorf("creating an ApprovalRequest in %s for %s: %w", s.namespace, call.Tool, err)
	}
	s.remember(created)
	return ticketOf(created), nil
}

// WaitSynced waits, at most syncWait and while ctx lasts, for the first
// list of requests: until then Status answers NotFound for a request that
// exists (one made before this process started).
func (s *Store) WaitSynced(ctx context.Context) error { return s.waitSynced(ctx) }

// waitSynced waits, at most syncWait and while ctx lasts, for the first
// list of requests.
func (s *Store) waitSynced(ctx context.Context) error {
	if s.HasSynced() {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, syncWait)
	defer cancel()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for !s.HasSynced() {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("ApprovalRequests in %s not listed yet (is the store running, the API server reachable?): %w",
				s.namespace, ctx.Err())
		}
	}
	return nil
}

// pending is the ticket of a pending request for call, if there is one;
// the one that expires last when there are several (made by replicas at
// once).
func (s *Store) pending(call *Call, key string, now time.Time) (Ticket, bool) {
	// An approved request not yet used is this call's too: an approval
	// binds the call, not the connection that asked (the client may have
	// gone away and sent it again). It is preferred to a pending one.
	var best *v1alpha1.ApprovalRequest
	bestApproved := false
	for _, ar := range s.byLabel(indexKey, v1alpha1.LabelApprovalKey, key) {
		st := StateOf(ar, now)
		if !callOf(ar).Same(call) || !shows(ar, call) || (st != Pending && st != Approved) {
			continue
		}
		approved := st == Approved
		if best == nil || (approved && !bestApproved) || (approved == bestApproved && ar.Spec.ExpiresAt.After(best.Spec.ExpiresAt.Time)) {
			best, bestApproved = ar, approved
		}
	}
	if best == nil {
		return Ticket{}, false
	}
	return ticketOf(best), true
}

// countPending counts the pending requests of call's queue (queueOf).
func (s *Store) countPending(call *Call, now time.Time) int {
	n := 0
	for _, ar := range s.byIndex(indexAgent, AgentKey(call.ServiceAccount+"\x00"+call.AgentID), queueOf) {
		if StateOf(ar, now) == Pending {
			n++
		}
	}
	return n
}

// newRequest is the ApprovalRequest that asks about call until expires.
// Its status is left empty: decisions are people's, conditions the
// operator's.
func newRequest(call *Call, namespace, key, agent string, expires time.Time) *v1alpha1.ApprovalRequest {
	sh := shownFor(call)
	return &v1alpha1.ApprovalRequest{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ApprovalRequest"},
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: namePrefix(call.Tool),
			Namespace:    namespace,
			Labels:       map[string]string{v1alpha1.LabelApprovalKey: key, v1alpha1.LabelApprovalAgent: agent},
		},
		Spec: v1alpha1.ApprovalRequestSpec{
			AgentID:         call.AgentID,
			ServiceAccount:  sh.serviceAccount,
			Tool:            call.Tool,
			Server:          call.Server,
			Action:          call.Action,
			ArgumentsDigest: call.Digest,
			Preview:         sh.preview,
			Policy:          sh.policy,
			Rule:            sh.rule,
			PolicyVersion:   call.PolicyVersion,
			BundleRevision:  call.Revision,
			Reason:          sh.reason,
			// The API keeps whole seconds: cut here, so the request never
			// outlives the rule's timeout and the ticket says what is stored.
			ExpiresAt: metav1.NewTime(expires.Truncate(time.Second)),
		},
	}
}

// maxPrefix keeps generated names short enough to read in kubectl's
// listing; the API adds five random characters.
const maxPrefix = 40

// namePrefix is a generateName for a request about tool: the tool's name in
// lower case, runs of anything but letters and digits as one '-'.
func namePrefix(tool string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(tool) {
		if b.Len() >= maxPrefix {
			break
		}
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if b.Len() > 0 && !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	p := strings.TrimSuffix(b.String(), "-")
	if p == "" {
		p = "call"
	}
	return p + "-"
}

// previewOf is call's preview as the request stores it: cut to the CRD's
// limit.
func previewOf(call *Call) string {
	return stored(cutUTF8(call.Preview, v1alpha1.MaxApprovalPreviewLength))
}

// stored is s as the API server stores it: JSON carries only valid UTF-8,
// so each invalid byte becomes U+FFFD (as encoding/json writes it, and as a
// conversion to runes reads it). Comparing a request with a call compares
// what was stored.
func stored(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return string([]rune(s))
}

// cutUTF8 cuts s to at most n bytes without splitting a character: at most
// n characters too, as the CRD's maxLength counts them.
func cutUTF8(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
