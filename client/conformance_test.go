package client

import (
	"context"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/conformance"
)

// TestConformance decides the shared set (config/samples/expected-
// decisions.json) through a real sidecar over both transports, and in
// process with Local: the Python and TypeScript clients run the same set
// against the same sidecar, so every client decides identically.
func TestConformance(t *testing.T) {
	cases, err := conformance.Load(samples)
	if err != nil {
		t.Fatal(err)
	}
	bundle := sampleBundle(t)
	sc := startSidecar(t, bundle, nil)
	for name, url := range map[string]string{"tcp": sc.tcp, "unix": sc.unix} {
		t.Run(name, func(t *testing.T) {
			c := newClient(t, Options{URL: url})
			ran := 0
			for _, cs := range cases {
				if cs.Now != "" {
					continue // a running sidecar reads the real clock; Local runs these below
				}
				ran++
				res := evaluate(t, c, requestOf(t, cs.Body))
				if m := cs.Mismatch(conformance.Of(res.Result)); m != "" {
					t.Errorf("%s (%s)", m, res.Reason)
				}
			}
			if ran == 0 {
				t.Errorf("none of the %d cases runs without a set clock", len(cases))
			}
		})
	}
	t.Run("local", func(t *testing.T) {
		for _, cs := range cases {
			opts := LocalOptions{BundlePath: bundle}
			if cs.Now != "" {
				at := cs.At
				opts.Now = func() time.Time { return at }
			}
			l, err := NewLocal(opts)
			if err != nil {
				t.Fatal(err)
			}
			res, err := l.Evaluate(context.Background(), requestOf(t, cs.Body))
			if err != nil {
				t.Fatal(err)
			}
			if m := cs.Mismatch(conformance.Of(res.Result)); m != "" {
				t.Errorf("%s (%s)", m, res.Reason)
			}
		}
	})
}
