package httploop

import (
	"context"
	"errors"
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
//
// A connection that carries an MCP proxy request (HoldStream) leaves that
// cap for a budget of its own, maxStreams, for the rest of its life: MCP
// streams (a GET's event stream, a POST answered as one) and calls waiting
// on a slow upstream are held for as long as the agent or the upstream
// likes, and at the one cap they took every slot, so decisions and the
// liveness probe (kubelet runs it over the same socket) found none, and
// kubelet restarted the sidecar (issue 24 §3). In their budget, held ones
// are never evicted; at it, an idle one is, else the new one is refused.
type connLimiter struct {
	net.Listener
	max, maxStreams int
	evicted         prometheus.Counter
	refused         prometheus.Counter
	open            prometheus.Gauge
	streamsOpen     prometheus.Gauge
	streamsRefused  prometheus.Counter

	mu    sync.Mutex
	conns map[*Conn]struct{}
	// streams are the connections in the MCP budget.
	streams map[*Conn]struct{}
}

// ConnMetrics are the connection families, by listener. The Streams ones
// may be nil for a listener without MCP connections (maxStreams 0).
type ConnMetrics struct {
	Open             *prometheus.GaugeVec
	Evicted, Refused *prometheus.CounterVec
	StreamsOpen      *prometheus.GaugeVec
	StreamsRefused   *prometheus.CounterVec
}

// LimitConns caps ln at max connections, and maxStreams more that carry
// MCP requests (see connLimiter), counted in m under the listener label.
func LimitConns(ln net.Listener, max, maxStreams int, m ConnMetrics, listener string) net.Listener {
	l := &connLimiter{Listener: ln, max: max, maxStreams: maxStreams,
		conns: make(map[*Conn]struct{}, max), streams: make(map[*Conn]struct{}),
		evicted: m.Evicted.WithLabelValues(listener), refused: m.Refused.WithLabelValues(listener),
		open: m.Open.WithLabelValues(listener)}
	if m.StreamsOpen != nil {
		l.streamsOpen = m.StreamsOpen.WithLabelValues(listener)
		l.streamsRefused = m.StreamsRefused.WithLabelValues(listener)
	}
	return l
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
		if victim = victimIn(l.conns); victim == nil {
			l.mu.Unlock()
			return false
		}
		delete(l.conns, victim)
	}
	l.conns[tc] = struct{}{}
	l.counted()
	l.mu.Unlock()
	l.evict(victim)
	return true
}

// victimIn picks the connection to evict from pool: the one waiting
// longest among those in the middle of nothing useful, else the one idle
// longest between two requests; nil when all are busy. Callers hold mu.
func victimIn(pool map[*Conn]struct{}) *Conn {
	var victim, idle *Conn
	oldest, oldestIdle := int64(0), int64(0)
	for c := range pool {
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
	return victim
}

// evict closes a victim removed from its pool; nil is none.
func (l *connLimiter) evict(victim *Conn) {
	if victim != nil {
		l.evicted.Inc()
		_ = victim.Conn.Close() // its server goroutine sees the error and ends
	}
}

// counted updates the gauges. Callers hold mu.
func (l *connLimiter) counted() {
	l.open.Set(float64(len(l.conns) + len(l.streams)))
	if l.streamsOpen != nil {
		l.streamsOpen.Set(float64(len(l.streams)))
	}
}

func (l *connLimiter) forget(tc *Conn) {
	l.mu.Lock()
	delete(l.conns, tc)
	delete(l.streams, tc)
	l.counted()
	l.mu.Unlock()
}

// ErrStreamBudget is HoldStream's refusal: the listener holds its budget
// of MCP connections, each with a request in flight.
var ErrStreamBudget = errors.New("the sidecar holds --max-mcp-connections MCP connections on this listener, each with a request or stream in flight; retry once one ends")

// errEvicted is HoldStream's answer for a connection evicted first.
var errEvicted = errors.New("the connection was closed at the connection cap")

// HoldStream moves the connection into the MCP budget (see connLimiter),
// where it stays, and marks it busy (SetWaiting ends that) for the request
// the MCP proxy serves on it now, however long that takes. At the budget,
// an idle MCP connection is evicted for it; ErrStreamBudget when none is.
// Any other error means the connection was evicted first: it is being
// closed, and the request is not served.
func (c *Conn) HoldStream() error {
	if c == nil {
		return nil
	}
	l := c.l
	l.mu.Lock()
	if _, held := l.streams[c]; held {
		c.busy.Store(true)
		l.mu.Unlock()
		return nil
	}
	if _, open := l.conns[c]; !open {
		l.mu.Unlock()
		return errEvicted
	}
	var victim *Conn
	if len(l.streams) >= l.maxStreams {
		if victim = victimIn(l.streams); victim == nil {
			l.mu.Unlock()
			if l.streamsRefused != nil {
				l.streamsRefused.Inc()
			}
			return ErrStreamBudget
		}
		delete(l.streams, victim)
	}
	delete(l.conns, c)
	l.streams[c] = struct{}{}
	c.busy.Store(true)
	l.counted()
	l.mu.Unlock()
	l.evict(victim)
	return nil
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
	_, open := c.l.conns[c]
	if _, held := c.l.streams[c]; !open && !held {
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
