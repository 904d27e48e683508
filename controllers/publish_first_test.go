package controllers

import (
	"context"
	"testing"
	"time"
)

// waitReturns runs g.wait(ctx) and returns a channel closed when it returns.
func waitReturns(ctx context.Context, g *publishFirst) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		g.wait(ctx)
		close(done)
	}()
	return done
}

func mustReturn(t *testing.T, done <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("wait did not return %s", what)
	}
}

func TestPublishFirstQuietPassesAtOnce(t *testing.T) {
	g := newPublishFirst(time.Hour)
	mustReturn(t, waitReturns(context.Background(), g), "with no publish in progress")
	g.begin()() // a publish that ended leaves it quiet
	mustReturn(t, waitReturns(context.Background(), g), "after the only publish ended")
	var none *publishFirst
	none.begin()()
	mustReturn(t, waitReturns(context.Background(), none), "without a gate")
}

func TestPublishFirstWaitsForEveryPublish(t *testing.T) {
	g := newPublishFirst(time.Hour)
	endA, endB := g.begin(), g.begin()
	done := waitReturns(context.Background(), g)
	endA()
	select {
	case <-done:
		t.Fatal("wait returned while a publish was still in progress")
	default:
	}
	endB()
	mustReturn(t, done, "when the last publish ended")

	// A new publish closes the gate again.
	endC := g.begin()
	done = waitReturns(context.Background(), g)
	select {
	case <-done:
		t.Fatal("wait returned while a new publish was in progress")
	default:
	}
	endC()
	mustReturn(t, done, "when the new publish ended")
}

func TestPublishFirstGivesWayAtMostMaxWait(t *testing.T) {
	const maxWait = 20 * time.Millisecond
	g := newPublishFirst(maxWait)
	defer g.begin()() // publishes that never stop
	start := time.Now()
	mustReturn(t, waitReturns(context.Background(), g), "after maxWait")
	if waited := time.Since(start); waited < maxWait {
		t.Fatalf("wait returned after %s, before maxWait %s with a publish in progress", waited, maxWait)
	}

	ctx, cancel := context.WithCancel(context.Background())
	slow := newPublishFirst(time.Hour)
	defer slow.begin()()
	done := waitReturns(ctx, slow)
	cancel()
	mustReturn(t, done, "when its context was cancelled")
}
