package controllers

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
)

// Outcomes of toolgate_approvals_total: one per transition of a request.
const (
	outcomeRequested = "requested"
	outcomeApproved  = "approved"
	outcomeDenied    = "denied"
	outcomeExpired   = "expired"
	outcomeConsumed  = "consumed"
)

// Results of toolgate_approvals_notify_total.
const (
	notifySent    = "sent"
	notifyFailed  = "failed"
	notifyDropped = "dropped"
)

var (
	// approvalsTotal counts transitions the operator recorded in a
	// request's Ready condition. The condition is the record: a transition
	// is counted by the reconcile whose status write (optimistically
	// locked) recorded it, so a restart, a stale cache or a second replica
	// never counts it twice. It is at most once rather than exactly: a
	// write that lands while the operator stops, its answer lost, is not
	// counted by anyone. A request that went through several states
	// while no operator ran counts each of them when next seen (a request
	// first seen decided counts requested and its decision).
	approvalsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_approvals_total",
		Help: "ApprovalRequest transitions by outcome: requested, approved, denied, expired, consumed.",
	}, []string{"outcome"})
	approvalsPending = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "toolgate_approvals_pending",
		Help: "ApprovalRequests waiting for a decision, by namespace.",
	}, []string{"namespace"})
	approvalNotices = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "toolgate_approvals_notify_total",
		Help: "Approval notices by result: sent, failed (every attempt failed, or the request expired first), dropped (queue full).",
	}, []string{"result"})
)

// registerApprovalMetrics adds the approval collectors, every label value
// present from the start at 0 so that increase() sees the first one.
func registerApprovalMetrics(reg prometheus.Registerer) {
	reg.MustRegister(approvalsTotal, approvalsPending, approvalNotices)
	for _, o := range []string{outcomeRequested, outcomeApproved, outcomeDenied, outcomeExpired, outcomeConsumed} {
		approvalsTotal.WithLabelValues(o)
	}
	for _, r := range []string{notifySent, notifyFailed, notifyDropped} {
		approvalNotices.WithLabelValues(r)
	}
}

// pendingRequests is the set behind toolgate_approvals_pending: every
// request the reconciler last saw Pending. After a restart the first
// reconcile of every request (the cache's initial list) fills it again.
type pendingRequests struct {
	mu sync.Mutex
	m  map[types.NamespacedName]bool
}

func newPendingRequests() *pendingRequests {
	return &pendingRequests{m: map[types.NamespacedName]bool{}}
}

// set records whether the request is pending and updates its namespace's
// gauge; a namespace without any drops its series.
func (p *pendingRequests) set(key types.NamespacedName, pending bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m[key] == pending {
		return
	}
	if pending {
		p.m[key] = true
	} else {
		delete(p.m, key)
	}
	n := 0
	for k := range p.m {
		if k.Namespace == key.Namespace {
			n++
		}
	}
	if n == 0 {
		approvalsPending.DeleteLabelValues(key.Namespace)
		return
	}
	approvalsPending.WithLabelValues(key.Namespace).Set(float64(n))
}
