package httploop

import (
	"errors"
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func testConnMetrics() ConnMetrics {
	return ConnMetrics{
		Open:    prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "open"}, []string{"listener"}),
		Evicted: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "evicted"}, []string{"listener"}),
		Refused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "refused"}, []string{"listener"}),
	}
}

// SetBusy and the eviction in admit take the same lock: a connection chosen
// as the victim is never marked busy afterwards (its request is answered
// OVERLOADED, not evaluated on a closing connection), and a busy one is
// never chosen.
func TestEvictionAndEvaluationDoNotCross(t *testing.T) {
	l := LimitConns(nil, 1, 1, testConnMetrics(), "test").(*connLimiter)
	conn := func() *Conn {
		a, b := net.Pipe()
		t.Cleanup(func() { _, _ = a.Close(), b.Close() })
		return &Conn{Conn: a, l: l}
	}
	first, second := conn(), conn()
	if !l.admit(first) || !l.admit(second) {
		t.Fatal("the cap of 1 refused a connection while the other was idle")
	}
	if first.SetBusy() {
		t.Error("a connection evicted for the newer one was then marked busy")
	}
	if !second.SetBusy() {
		t.Fatal("an open connection could not be marked busy")
	}
	if l.admit(conn()) {
		t.Error("a connection was admitted by evicting one being evaluated")
	}
}

// TestMCPConnectionsHaveABudgetOfTheirOwn: a connection that carries an
// MCP request leaves the cap that decisions and probes use for a budget of
// its own; held there, it is never evicted; at the budget an idle one makes
// room, else the new one is refused ErrStreamBudget, and the decisions'
// cap is untouched either way.
func TestMCPConnectionsHaveABudgetOfTheirOwn(t *testing.T) {
	m := testConnMetrics()
	m.StreamsOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "streams_open"}, []string{"listener"})
	m.StreamsRefused = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "streams_refused"}, []string{"listener"})
	l := LimitConns(nil, 2, 2, m, "test").(*connLimiter)
	conn := func() *Conn {
		t.Helper()
		a, b := net.Pipe()
		t.Cleanup(func() { _, _ = a.Close(), b.Close() })
		c := &Conn{Conn: a, l: l}
		if !l.admit(c) {
			t.Fatal("a new connection was refused")
		}
		return c
	}
	first, second := conn(), conn()
	for _, c := range []*Conn{first, second} {
		if err := c.HoldStream(); err != nil {
			t.Fatalf("holding a stream within the budget: %v", err)
		}
	}
	// Two streams held: the decisions' cap of 2 is free, and stays so.
	third, fourth := conn(), conn()
	if len(l.conns) != 2 || len(l.streams) != 2 {
		t.Fatalf("%d connections, %d streams; want 2 and 2", len(l.conns), len(l.streams))
	}
	if err := third.HoldStream(); !errors.Is(err, ErrStreamBudget) {
		t.Fatalf("a third stream while two are held: %v, want ErrStreamBudget", err)
	}
	if !third.SetBusy() || !fourth.SetBusy() {
		t.Fatal("the refused stream's connection cannot be evaluated on")
	}
	third.SetWaiting()
	decision := conn()
	if !decision.SetBusy() {
		t.Fatal("a decision's connection was refused with the streams held")
	}
	decision.SetWaiting()
	// A stream ended (its connection idle): it makes room, evicted.
	first.SetWaiting()
	fifth := conn()
	if err := fifth.HoldStream(); err != nil {
		t.Fatalf("a stream with an idle one to evict: %v", err)
	}
	if _, held := l.streams[first]; held || first.SetBusy() {
		t.Error("the idle stream connection was not evicted")
	}
	if _, held := l.streams[second]; !held {
		t.Error("a held stream was evicted")
	}
	if got := testutil.ToFloat64(m.StreamsRefused.WithLabelValues("test")); got != 1 {
		t.Errorf("streams refused: %v, want 1", got)
	}
}
