package mcp

import (
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/engine"
)

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newTestProxy is the proxy of upstreams (NAME=URL) on a decider of its
// own (decide.NewInProcess: no decision log), bound as cfg says.
func newTestProxy(tb testing.TB, cfg decide.Config, upstreams ...string) *Proxy {
	tb.Helper()
	d, err := decide.NewInProcess(cfg)
	must(tb, err)
	p, err := New(d, Options{Listen: DefaultListen, Upstreams: upstreams}, prometheus.NewRegistry(), quietLogger(), time.Second)
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
