package local

import (
	"context"
	"testing"
	"time"

	"github.com/toolgate/toolgate/client/internal/clienttest"
	"github.com/toolgate/toolgate/internal/conformance"
)

// TestConformance decides the shared set (config/samples/expected-
// decisions.json) in process, as client's TestConformance decides it
// through a real sidecar: cases with a set clock run here only.
func TestConformance(t *testing.T) {
	cases, err := conformance.Load(clienttest.Samples)
	if err != nil {
		t.Fatal(err)
	}
	bundle := clienttest.SampleBundle(t)
	t.Run("local", func(t *testing.T) {
		for _, cs := range cases {
			opts := Options{BundlePath: bundle}
			if cs.Now != "" {
				at := cs.At
				opts.Now = func() time.Time { return at }
			}
			l, err := New(opts)
			if err != nil {
				t.Fatal(err)
			}
			res, err := l.Evaluate(context.Background(), clienttest.RequestOf(t, cs.Body))
			if err != nil {
				t.Fatal(err)
			}
			if m := cs.Mismatch(conformance.Of(res.Result)); m != "" {
				t.Errorf("%s (%s)", m, res.Reason)
			}
		}
	})
}
