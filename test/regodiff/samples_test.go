package regodiff

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/manifest"
)

const samples = "../../config/samples"

// samplesBundle is the bundle of every sample applied together, built as
// the operator builds it.
func samplesBundle(t testing.TB, now time.Time) engine.Bundle {
	t.Helper()
	all, err := manifest.Load([]string{samples}, nil)
	if err != nil {
		t.Fatal(err)
	}
	set, err := all.OneNamespace("")
	if err != nil {
		t.Fatal(err)
	}
	return bundle.Build(set.PolicyObjects(), set.FrozenAgentObjects(), now)
}

// TestSamples decides every sample request (expected-decisions.json) with
// OPA and the engine, at the case's instant or a fixed one.
func TestSamples(t *testing.T) {
	var cases struct {
		Cases []struct {
			Request string `json:"request"`
			Now     string `json:"now"`
		} `json:"cases"`
	}
	doc, err := os.ReadFile(filepath.Join(samples, "expected-decisions.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(doc, &cases); err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 11, 16, 9, 30, 0, 0, time.UTC) // a Monday, in office hours
	p, err := prepare(t, samplesBundle(t, base))
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range cases.Cases {
		req, err := os.ReadFile(filepath.Join(samples, "requests", c.Request))
		if err != nil {
			t.Fatal(err)
		}
		at := []time.Time{base, base.Add(10 * time.Hour), base.Add(-72 * time.Hour)}
		if c.Now != "" {
			now, err := time.Parse(time.RFC3339, c.Now)
			if err != nil {
				t.Fatal(err)
			}
			at = []time.Time{now}
		}
		for _, now := range at {
			for _, u := range []engine.Usage{nil, usage{1}, usage{2}} {
				ok, err := p.compare(t, req, now, u)
				if err != nil {
					t.Errorf("%s: %v", c.Request, err)
				}
				if ok {
					n++
				}
			}
		}
	}
	t.Logf("config/samples: %d decisions compared, OPA and the engine agree", n)
}
