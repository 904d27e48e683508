package httploop

import (
	"net"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
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
	l := LimitConns(nil, 1, testConnMetrics(), "test").(*connLimiter)
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
