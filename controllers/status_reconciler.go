package controllers

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// statusReconciler writes the status of a namespace's objects from the last
// outcome the bundle reconciler stored. Several publishes in a row coalesce
// into one pass.
type statusReconciler struct {
	client   client.Client
	recorder events.EventRecorder
	outcomes *outcomeStore
	// clusterPolicies and clusterFrozen take the names of the
	// cluster-scoped objects a pass saw: their status sums up the
	// namespaces' outcomes. Nil: not passed on (tests).
	clusterPolicies, clusterFrozen chan<- event.TypedGenericEvent[string]
	// publishing: a pass gives way to publishes in progress (nil: it does
	// not wait).
	publishing *publishFirst
}

func (r *statusReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	r.publishing.wait(ctx)
	in, err := gather(ctx, r.client, req.Namespace)
	if err != nil {
		return ctrl.Result{}, err
	}
	// The outcome is read after the objects: one published meanwhile
	// describes them, and they get their status without a Reconciling
	// mark first.
	out, ok := r.outcomes.get(req.Namespace)
	if !ok {
		return ctrl.Result{}, nil // emptied: nothing left to describe
	}
	view, err := r.enforcementView(ctx, in)
	if err != nil {
		return ctrl.Result{}, err
	}
	wrote, err := r.writeStatuses(ctx, in, out, view)
	if err != nil {
		return ctrl.Result{}, err
	}
	return catchUp(view.recheck(), wrote > 0), r.clusterStatusesDue(ctx, in)
}

// cacheCatchUp is how soon a pass that wrote statuses comes back to check
// them against the cache.
const cacheCatchUp = time.Second

// catchUp makes a pass that wrote come back within cacheCatchUp. A pass
// run before the cache holds its patches (a Lease renewed just after)
// compares with the status from before them and may skip a write it
// needs: Enforced True->False->True would stay False until the next Lease
// expiry. Status changes are no event for the status controllers (their
// watches pass on spec changes only), so come back once the cache has
// caught up; that pass writes nothing when all is well.
func catchUp(res ctrl.Result, wrote bool) ctrl.Result {
	if wrote && (res.RequeueAfter == 0 || res.RequeueAfter > cacheCatchUp) {
		res.RequeueAfter = cacheCatchUp
	}
	return res
}

// clusterStatusesDue hands the cluster-scoped objects that select the
// namespace to their status controllers.
func (r *statusReconciler) clusterStatusesDue(ctx context.Context, in inputs) error {
	send := func(ch chan<- event.TypedGenericEvent[string], name string) error {
		if ch == nil {
			return nil
		}
		select {
		case ch <- event.TypedGenericEvent[string]{Object: name}:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for i := range in.clusterPolicies {
		if err := send(r.clusterPolicies, in.clusterPolicies[i].Name); err != nil {
			return err
		}
	}
	for i := range in.clusterFrozen {
		if err := send(r.clusterFrozen, in.clusterFrozen[i].Name); err != nil {
			return err
		}
	}
	return nil
}

// outcomeStore hands each namespace's latest outcome from the bundle
// reconciler to the status reconciler. After a restart it is empty until the
// first publish, which recomputes every outcome.
type outcomeStore struct {
	mu sync.Mutex
	m  map[string]outcome
	// history is which generations each recent revision carries
	// (revision_history.go): a published outcome adds to it.
	history *revisionHistory
}

func newOutcomeStore() *outcomeStore {
	return &outcomeStore{m: map[string]outcome{}, history: newRevisionHistory()}
}

func (s *outcomeStore) set(ns string, o outcome) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[ns] = o
	switch {
	case o.publishErr != nil:
	case o.tooLarge == nil:
		s.history.record(ns, o.revision, o.generations)
	case o.freezeRevision != "":
		// The freezes went out alone, on the last policies that fit: the
		// policies' own Ready says BundleTooLarge, so only the freezes'
		// generations in it are ever read.
		s.history.record(ns, o.freezeRevision, o.generations)
	}
}

func (s *outcomeStore) get(ns string) (outcome, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.m[ns]
	return o, ok
}

func (s *outcomeStore) delete(ns string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, ns)
	s.history.forget(ns)
}
