package usage

import (
	"context"
	"time"

	"github.com/toolgate/toolgate/engine"
)

// SharedStore counts the limits whose store is shared (engine.SharedUsage):
// one count across every sidecar of a namespace, kept in a server the user
// runs (Redis; package usage/redis). The decision stays local: the decision
// core makes one round trip per call that a shared limit may read
// (Reserve), evaluates with the counts it returned, and gives the
// reservation back (Release) only when the call is not allowed after all.
//
// Every error wraps ErrUnavailable: a call under a shared limit is then
// denied USAGE_UNAVAILABLE (unless the limit has failOpen), never let
// through uncounted.
type SharedStore interface {
	// Reserve adds the call at at to every counter at once, atomically in
	// the store, and returns for each (in order) what its trailing window
	// held before the call. Between Reserve and Release other sidecars see
	// the call counted: a reservation given back can only have made them
	// deny early, never allow past a limit.
	// Each query names its counter (engine.SharedQuery: limit, key, tool)
	// and what the call adds (Add); the store prefixes the counter's key
	// with the cluster's name and the sidecar's namespace, and keeps it no
	// longer than its window.
	Reserve(ctx context.Context, at time.Time, counters []engine.SharedQuery) (Reservation, error)
	// Release takes back what Reserve added, for a call that was not
	// allowed after all.
	Release(ctx context.Context, r Reservation) error
	// Check tells whether the store answers now (the sidecar's readiness
	// and its metrics), with the reason when it does not.
	Check(ctx context.Context) error
	Close() error
}

// Reservation is what Reserve added for one call.
type Reservation struct {
	// Used is, per counter in Reserve's order, what its window held
	// before this call: the calls (rateLimit) or tokens (tokenBudget)
	// already allowed.
	Used []float64
	// Handle is the store's own record of what it added (for Release),
	// opaque to the caller.
	Handle any
}
