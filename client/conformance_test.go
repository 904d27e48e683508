package client_test

import (
	"testing"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/client/internal/clienttest"
	"github.com/toolgate/toolgate/internal/conformance"
)

// TestConformance decides the shared set (config/samples/expected-
// decisions.json) through a real sidecar over both transports (and
// client/local's TestConformance in process): the Python and TypeScript
// clients run the same set against the same sidecar, so every client
// decides identically.
func TestConformance(t *testing.T) {
	cases, err := conformance.Load(clienttest.Samples)
	if err != nil {
		t.Fatal(err)
	}
	bundle := clienttest.SampleBundle(t)
	sc := clienttest.StartSidecar(t, bundle, nil)
	for name, url := range map[string]string{"tcp": sc.TCP, "unix": sc.Unix} {
		t.Run(name, func(t *testing.T) {
			c := clienttest.NewClient(t, client.Options{URL: url})
			ran := 0
			for _, cs := range cases {
				if cs.Now != "" {
					continue // a running sidecar reads the real clock; client/local runs these
				}
				ran++
				res := clienttest.Evaluate(t, c, clienttest.RequestOf(t, cs.Body))
				if m := cs.Mismatch(conformance.Of(res.Result)); m != "" {
					t.Errorf("%s (%s)", m, res.Reason)
				}
			}
			if ran == 0 {
				t.Errorf("none of the %d cases runs without a set clock", len(cases))
			}
		})
	}
}
