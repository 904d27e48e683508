package controllers

import (
	"context"
	"sync"
	"time"
)

// publishFirst lets status passes give way to publishes: a sidecar waits for
// its bundle, a status can come after. Both compete for the same API
// server, where a status patch costs about three times a ConfigMap create
// (make measure-scale -floor on a 2-core envtest: about 200 status patches
// a second, 560-890 ConfigMap creates, whatever the requests in flight).
// With status passes running beside the publishes, the last of 1,000
// namespaces' bundles came after 26 s; giving way, after 6.9 s in the same
// run (docs/performance.md#scale).
//
// A status pass waits while any publish is in progress, at most maxWait: a
// namespace whose publishes never stop still gets its statuses, one pass
// per worker per maxWait, and a quiet manager passes at once.
type publishFirst struct {
	maxWait time.Duration

	mu         sync.Mutex
	publishing int
	// quiet is closed when publishing drops to 0, and replaced when it
	// rises from 0.
	quiet chan struct{}
}

func newPublishFirst(maxWait time.Duration) *publishFirst {
	q := make(chan struct{})
	close(q)
	return &publishFirst{maxWait: maxWait, quiet: q}
}

// begin marks a publish in progress until the returned func is called.
// A nil publishFirst does nothing (tests that build a reconciler alone).
func (g *publishFirst) begin() (end func()) {
	if g == nil {
		return func() {}
	}
	g.mu.Lock()
	if g.publishing == 0 {
		g.quiet = make(chan struct{})
	}
	g.publishing++
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.publishing--
		if g.publishing == 0 {
			close(g.quiet)
		}
	}
}

// wait returns once no publish is in progress, after maxWait at the latest,
// or when ctx is done.
func (g *publishFirst) wait(ctx context.Context) {
	if g == nil {
		return
	}
	g.mu.Lock()
	quiet := g.quiet
	g.mu.Unlock()
	select {
	case <-quiet:
		return
	default:
	}
	t := time.NewTimer(g.maxWait)
	defer t.Stop()
	select {
	case <-quiet:
	case <-t.C:
	case <-ctx.Done():
	}
}
