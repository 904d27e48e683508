package regodiff

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
)

// corpusCase is one case of the engine's table tests, as engine's
// -write-corpus records it (engine/corpus_test.go).
type corpusCase struct {
	Name    string                      `json:"name"`
	Bundle  engine.Bundle               `json:"bundle"`
	Request json.RawMessage             `json:"request"`
	Now     time.Time                   `json:"now"`
	Counts  map[string]map[string]int64 `json:"counts"`
	Tokens  map[string]float64          `json:"tokens"`
}

// recorded answers a limit with the count the case's Usage gave.
type recorded struct{ c *corpusCase }

func perOf(key engine.UsageKey) string {
	switch {
	case key.Namespace:
		return engine.PerNamespace
	case key.Session:
		return engine.PerSession
	}
	return engine.PerAgent
}

func (u recorded) Calls(key engine.UsageKey, _ string, window time.Duration, _ time.Time) int64 {
	return u.c.Counts["calls"][perOf(key)+"/"+window.String()]
}

func (u recorded) Tokens(key engine.UsageKey, window time.Duration, _ time.Time) float64 {
	return u.c.Tokens[perOf(key)+"/"+window.String()]
}

// Shared answers a shared limit with the count recorded under its
// input.counts key (shared/per/LimitID).
func (u recorded) Shared(q engine.SharedQuery) float64 {
	k := "shared/" + perOf(q.Key) + "/" + q.Limit
	if q.Tokens {
		return u.c.Tokens[k]
	}
	return float64(u.c.Counts["calls"][k])
}

// TestEngineCases decides every case of the engine's table tests
// (TestEvaluate*, TestGateway*, TestOperators) with OPA and the engine. A
// case whose bundle the exporter refuses (a pattern outside the exported
// regex subset) must be refused for that reason alone.
func TestEngineCases(t *testing.T) {
	doc, err := os.ReadFile("testdata/engine-cases.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []corpusCase
	if err := json.Unmarshal(doc, &cases); err != nil {
		t.Fatal(err)
	}
	compared, refused := 0, 0
	for i := range cases {
		c := &cases[i]
		p, err := prepare(t, c.Bundle)
		if err != nil {
			if !strings.Contains(err.Error(), "pattern") {
				t.Errorf("%s: refused for another reason than its pattern: %v", c.Name, err)
			}
			refused++
			continue
		}
		var u engine.Usage
		if c.Counts != nil || c.Tokens != nil {
			u = recorded{c}
		}
		ok, err := p.compare(t, c.Request, c.Now, u)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
		}
		if ok {
			compared++
		}
	}
	t.Logf("engine table tests: %d of %d cases compared, %d refused for their pattern", compared, len(cases), refused)
	if compared < len(cases)*9/10 {
		t.Errorf("only %d of %d cases compared", compared, len(cases))
	}
}
