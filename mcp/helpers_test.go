package mcp

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/decisionlog"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/usage"
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newTestProxy is the proxy of upstreams (NAME=URL) on a decider of its
// own, bound as cfg says, wired as the sidecar wires them (no decision log).
func newTestProxy(tb testing.TB, cfg decide.Config, upstreams ...string) *Proxy {
	tb.Helper()
	cfg.MaxEvaluations, cfg.MaxBodyBytesInFlight, cfg.MaxRequestElements, cfg.MaxTrace = 32, 16<<20, engine.DefaultMaxElements, 2000
	ledger, err := usage.New(usage.DefaultMaxKeys, usage.DefaultMaxEventsPerKey)
	must(tb, err)
	reg := prometheus.NewRegistry()
	log := decisionlog.New(decisionlog.Config{}, prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dropped"}, []string{"sink", "reason"}), quietLogger())
	d, err := decide.New(cfg, ledger, log, decide.NewMetrics(reg, "test_", ledger), quietLogger())
	must(tb, err)
	p, err := New(d, Options{Listen: DefaultListen, Upstreams: upstreams}, reg, quietLogger(), time.Second)
	must(tb, err)
	tb.Cleanup(p.Close)
	return p
}

// serve has the proxy's decider serve b as the sidecar loads a bundle
// (encoded, decoded, compiled), and tells the proxy.
func (p *Proxy) serve(tb testing.TB, b engine.Bundle) {
	tb.Helper()
	doc, _, err := engine.Encode(b)
	must(tb, err)
	b, err = engine.Decode(doc)
	must(tb, err)
	c, diags := engine.Compile(b)
	if len(diags) > 0 {
		tb.Fatal(diags)
	}
	p.d.Serve(c, b.Revision, "test", time.Now())
	p.BundleLoaded(b)
}
