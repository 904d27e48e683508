package httploop

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// connLimiter caps the connections open on one listener. At the cap, a new
// connection evicts an open one: first the one that has waited longest
// among those in the middle of nothing useful (silent since they
// connected, or still sending a request's headers or body), and only when
// there is none of those, the one idle longest among the keep-alive
// connections waiting between two requests. A connection
// whose request is being decoded and evaluated is never evicted (there are
// at most --max-evaluations of those). So a flood of slow or idle
// connections holds at most the cap without cutting the keep-alive
// connections of a client that uses them, and a new client that sends its
// request at once is served: its connection is the newest, the last to be
// evicted. Only when every connection is busy evaluating is a new one
// refused.
//
// Blocking Accept at the cap instead (netutil.LimitListener) would leave
// new clients in the kernel's backlog until a timeout cut a slow
// connection, seconds later: exactly the starvation the cap is for.
type connLimiter struct {
	net.Listener
	max     int
	evicted prometheus.Counter
	refused prometheus.Counter
	open    prometheus.Gauge

	mu    sync.Mutex
	conns map[*Conn]struct{}
}

// ConnMetrics are the connection families, by listener.
type ConnMetrics struct {
	Open             *prometheus.GaugeVec
	Evicted, Refused *prometheus.CounterVec
}

// LimitConns caps ln at max connections (see connLimiter), counted in m
// under the listener label.
func LimitConns(ln net.Listener, max int, m ConnMetrics, listener string) net.Listener {
	return &connLimiter{Listener: ln, max: max, conns: make(map[*Conn]struct{}, max),
		evicted: m.Evicted.WithLabelValues(listener), refused: m.Refused.WithLabelValues(listener),
		open: m.Open.WithLabelValues(listener)}
}

// Conn is a connection as the limiter sees it.
type Conn struct {
	net.Conn
	l *connLimiter
	// waitingSince is when the connection last started waiting on its
	// client (accepted, idle, or its request's headers read), in
	// nanoseconds since the limiter's epoch; busy is set while a request
	// of it is evaluated.
	waitingSince atomic.Int64
	busy         atomic.Bool
	keptAlive    atomic.Bool // idle between two requests, not sending one
	closeOnce    sync.Once
	closeErr     error
}

// epoch makes waitingSince a monotonic reading that fits an int64.
var epoch = time.Now()

func MonoNow() int64 { return int64(time.Since(epoch)) }

// Accept returns the next connection, evicting one first when the cap is
// reached.
func (l *connLimiter) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		tc := &Conn{Conn: c, l: l}
		tc.waitingSince.Store(MonoNow())
		if l.admit(tc) {
			return tc, nil
		}
		l.refused.Inc()
		_ = c.Close()
	}
}

// admit registers tc, evicting the longest-waiting idle or slow
// connection when the cap is reached; false when every open connection is
// being evaluated.
func (l *connLimiter) admit(tc *Conn) bool {
	l.mu.Lock()
	var victim *Conn
	if len(l.conns) >= l.max {
		var idle *Conn // the longest idle of the kept-alive ones
		oldest, oldestIdle := int64(0), int64(0)
		for c := range l.conns {
			if c.busy.Load() {
				continue
			}
			since := c.waitingSince.Load()
			if c.keptAlive.Load() {
				if idle == nil || since < oldestIdle {
					idle, oldestIdle = c, since
				}
			} else if victim == nil || since < oldest {
				victim, oldest = c, since
			}
		}
		if victim == nil {
			victim = idle
		}
		if victim == nil {
			l.mu.Unlock()
			return false
		}
		delete(l.conns, victim)
	}
	l.conns[tc] = struct{}{}
	n := len(l.conns)
	l.mu.Unlock()
	l.open.Set(float64(n))
	if victim != nil {
		l.evicted.Inc()
		_ = victim.Conn.Close() // its server goroutine sees the error and ends
	}
	return true
}

func (l *connLimiter) forget(tc *Conn) {
	l.mu.Lock()
	delete(l.conns, tc)
	n := len(l.conns)
	l.mu.Unlock()
	l.open.Set(float64(n))
}

// Close closes the connection once and forgets it.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() {
		c.closeErr = c.Conn.Close()
		c.l.forget(c)
	})
	return c.closeErr
}

// TrackConnState is the http.Server hook that keeps waitingSince current.
// net/http reports StateActive once a request's headers are read, so a
// connection trickling its headers stays in its earlier state, and its
// earlier time, throughout.
func TrackConnState(c net.Conn, st http.ConnState) {
	tc, ok := c.(*Conn)
	if !ok {
		return
	}
	switch st {
	case http.StateNew, http.StateActive, http.StateIdle:
		// Idle comes only after a response: a client keeping its
		// connection for the next call.
		tc.keptAlive.Store(st == http.StateIdle)
		tc.waitingSince.Store(MonoNow())
	case http.StateClosed, http.StateHijacked:
		tc.l.forget(tc)
	}
}

type connKey struct{}

// WithConn is the http.Server hook that lets a handler find its
// connection, to mark it busy.
func WithConn(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*Conn); ok {
		return context.WithValue(ctx, connKey{}, tc)
	}
	return ctx
}

// ConnOf is the tracked connection r arrived on; nil for a listener
// without a limiter (tests that serve the handler directly).
func ConnOf(r *http.Request) *Conn {
	tc, _ := r.Context().Value(connKey{}).(*Conn)
	return tc
}

// SetBusy protects the connection from eviction while its request is
// evaluated; SetWaiting ends that. It takes the limiter's lock, which admit
// holds while it picks and removes a victim, so the two cannot cross: false
// means the connection was evicted first (it is being closed), and the
// request is not evaluated.
func (c *Conn) SetBusy() bool {
	if c == nil {
		return true
	}
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	if _, open := c.l.conns[c]; !open {
		return false
	}
	c.busy.Store(true)
	return true
}

func (c *Conn) SetWaiting() {
	if c != nil {
		c.waitingSince.Store(MonoNow())
		c.busy.Store(false)
	}
}

// CloseWrite lets net/http half-close a connection it is done with, as it
// does for a bare TCP connection, so the client reads the last response
// rather than a reset.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
