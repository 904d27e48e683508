package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// slowStats is what the slow connections saw.
type slowStats struct {
	opened     atomic.Int64 // connections dialled
	cut        atomic.Int64 // closed by the sidecar (a timeout or an eviction)
	dialFailed atomic.Int64
	answered   atomic.Int64 // got response bytes: only a timeout's 400 should
}

// slowClients keeps n connections to t that never finish a request: a
// third trickle their headers a byte at a time, a third their body, a
// third say nothing at all. They are the load the sidecar's timeouts and
// connection cap are for. A connection the sidecar closes is reopened
// after interval, so the pressure lasts until ctx ends.
func slowClients(ctx context.Context, t target, n int, interval time.Duration) (*slowStats, func()) {
	st := &slowStats{}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			// Spread the first dials over one interval, as an attacker
			// ramping up would, rather than in one burst.
			if !sleep(ctx, time.Duration(i)*interval/time.Duration(n)) {
				return
			}
			for ctx.Err() == nil {
				slowConnection(ctx, t, i%3, interval, st)
				if !sleep(ctx, interval) {
					return
				}
			}
		})
	}
	return st, func() {
		cancel()
		wg.Wait()
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// slowConnection holds one connection until the sidecar closes it or ctx
// ends.
func slowConnection(ctx context.Context, t target, mode int, interval time.Duration, st *slowStats) {
	c, err := t.dial()
	if err != nil {
		st.dialFailed.Add(1)
		return
	}
	st.opened.Add(1)
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	defer c.Close()
	var opening string
	switch mode {
	case 0: // headers, never ended
		opening = fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nX-Slow: ", t.path, t.host)
	case 1: // a body declared long and sent a byte at a time
		opening = fmt.Sprintf("POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 65536\r\n\r\n{\"tool_name\":\"x\",\"pad\":\"", t.path, t.host)
	}
	if opening != "" {
		if _, err := io.WriteString(c, opening); err != nil {
			st.cut.Add(1)
			return
		}
	}
	// A reader notices the close; the writer keeps trickling until then.
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		buf := make([]byte, 512)
		for {
			n, err := c.Read(buf)
			if n > 0 {
				st.answered.Add(1)
			}
			if err != nil {
				return
			}
		}
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-closed:
			if ctx.Err() == nil {
				st.cut.Add(1)
			}
			return
		case <-ctx.Done():
			return
		case <-tick.C:
			if opening != "" {
				_, _ = c.Write([]byte{'x'})
			}
		}
	}
}
