package engine

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// refShared is the decision core's side of SharedUsage in miniature: it
// answers from refUsage.shared by the query's own key, and holds each
// query to the limit its LimitID names in the bundle (store shared, max,
// window, failOpen, key and what the call adds), so a query naming the
// wrong limit, key or amount shows as a problem even when the decision
// happens to agree.
type refShared struct {
	u        *refUsage
	b        Bundle
	call     *refRequest
	now      time.Time
	problems []string
	// s is every query asked, in order.
	s []SharedQuery
}

// sharedFor is the SharedUsage an evaluation of req gets: nil unless u
// has the shared store on (then shared limits read Usage).
func (u *refUsage) sharedFor(b Bundle, req map[string]any, now time.Time) (SharedUsage, *refShared) {
	if u == nil || !u.sharedOn {
		return nil, nil
	}
	s := &refShared{u: u, b: b, call: refRead(req), now: now}
	return s, s
}

func (s *refShared) Shared(q SharedQuery) float64 {
	s.s = append(s.s, q)
	if msg := s.check(q); msg != "" {
		s.problems = append(s.problems, fmt.Sprintf("query %+v: %s", q, msg))
	}
	var n float64
	for _, c := range s.u.shared {
		if !s.u.owns(c, q.Key) || !refInWindow(c.At, q.Window, s.now) {
			continue
		}
		switch {
		case q.Tokens:
			n += c.Tokens
		case c.Tool == q.Tool:
			n++
		}
	}
	return n
}

// check finds a shared limit of the bundle that q describes exactly.
func (s *refShared) check(q SharedQuery) string {
	parts := strings.Split(q.Limit, "/")
	if len(parts) != 4 || (parts[3] != "rateLimit" && parts[3] != "tokenBudget") || (parts[0] != "Policy" && parts[0] != KindClusterPolicy) {
		return "a limit id not of the form kind/policy/rule/condition"
	}
	tokens := parts[3] == "tokenBudget"
	if q.Tokens != tokens {
		return "Tokens does not match the condition the id names"
	}
	call := s.call
	matches := func(l *Limit) bool {
		if l == nil || l.Store != StoreShared || l.Max != q.Max || l.FailOpen != q.FailOpen {
			return false
		}
		if w, ok := refWindow(l.Window); !ok || w != q.Window {
			return false
		}
		switch l.Per {
		case PerNamespace:
			if q.Key != (UsageKey{Namespace: true}) {
				return false
			}
		case PerSession:
			if !q.Key.Session || q.Key.Namespace || q.Key.ID != call.session {
				return false
			}
		default:
			if q.Key.Session || q.Key.Namespace || !strings.EqualFold(q.Key.ID, call.agent) {
				return false
			}
		}
		if tokens {
			return q.Tool == "" && q.Add == call.tokens
		}
		return q.Add == 1 && (!call.toolOK || q.Tool == call.tool)
	}
	if !slices.ContainsFunc(s.b.Policies, func(p Policy) bool {
		kind := "Policy"
		if p.Kind == KindClusterPolicy {
			kind = KindClusterPolicy
		}
		return kind == parts[0] && p.ID == parts[1] && slices.ContainsFunc(p.Rules, func(r Rule) bool {
			if r.ID != parts[2] || r.When == nil {
				return false
			}
			if tokens {
				return matches(r.When.TokenBudget)
			}
			return matches(r.When.RateLimit)
		})
	}) {
		return "no shared limit of the bundle is this one"
	}
	return ""
}
