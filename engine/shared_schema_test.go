package engine

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestSharedLimitsNeedSchemaVersionSharedLimits: a limit that is shared,
// per namespace or failOpen (or writes store out) makes a bundle version
// 7, whatever else it holds; it decodes back, a document claiming an
// older version with it is refused, and a sidecar whose newest version is
// 6 refuses it rather than count alone what every replica should count
// together. A plain limit keeps its older version.
func TestSharedLimitsNeedSchemaVersionSharedLimits(t *testing.T) {
	t.Parallel()
	if SchemaVersion != SchemaVersionSharedLimits || SchemaVersionSharedLimits != SchemaVersionResults+1 {
		t.Fatalf("newest version %d, shared limits %d: want shared limits the newest, after %d", SchemaVersion, SchemaVersionSharedLimits, SchemaVersionResults)
	}
	bundleWith := func(w When) Bundle {
		return Bundle{Policies: []Policy{ordered("p", gwRule("r", "deny", withWhen(w)))}}
	}
	if plain := bundleWith(When{RateLimit: &Limit{Max: 1, Window: "1m", Per: PerSession}}); plain.NeededSchemaVersion() != SchemaVersionGateway {
		v := plain.NeededSchemaVersion()
		t.Errorf("a local per-session limit: version %d, want %d", v, SchemaVersionGateway)
	}
	for name, w := range map[string]When{
		"shared rateLimit":           {RateLimit: &Limit{Max: 1, Window: "1m", Store: StoreShared}},
		"shared tokenBudget":         {TokenBudget: &Limit{Max: 1, Window: "1m", Store: StoreShared}},
		"failOpen":                   {RateLimit: &Limit{Max: 1, Window: "1m", Store: StoreShared, FailOpen: true}},
		"per namespace, local":       {RateLimit: &Limit{Max: 1, Window: "1m", Per: PerNamespace}},
		"per namespace tokenBudget":  {TokenBudget: &Limit{Max: 1, Window: "1m", Per: PerNamespace}},
		"store: local written out":   {RateLimit: &Limit{Max: 1, Window: "1m", Store: StoreLocal}},
		"beside a result-rule field": {RateLimit: &Limit{Max: 1, Window: "1m", Store: StoreShared}, Environments: []string{"prod"}},
	} {
		b := bundleWith(w)
		if name == "beside a result-rule field" {
			b.Policies[0].Rules = append(b.Policies[0].Rules, resultRule("res", "deny"))
		}
		if v := b.NeededSchemaVersion(); v != SchemaVersionSharedLimits {
			t.Errorf("%s: version %d, want %d", name, v, SchemaVersionSharedLimits)
			continue
		}
		doc, _, err := Encode(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, err := Decode(doc); err != nil {
			t.Errorf("%s: decoding its own document: %v", name, err)
		}
		older := bytes.Replace(doc, []byte(`"schemaVersion":7`), []byte(`"schemaVersion":6`), 1)
		if _, err := Decode(older); !errors.Is(err, ErrCorruptBundle) || !strings.Contains(err.Error(), "needs 7") {
			t.Errorf("%s: a document claiming version 6: %v, want refused as needing 7", name, err)
		}
		// A sidecar whose newest version is 6 checks the range first.
		if v := schemaVersionOf(t, doc); v <= SchemaVersionResults {
			t.Errorf("%s: written as version %d, which a version-6 sidecar would read", name, v)
		}
	}
}

// schemaVersionOf reads the version a document claims.
func schemaVersionOf(t *testing.T, doc []byte) int {
	t.Helper()
	var v int
	if _, err := fmt.Sscanf(string(doc), `{"schemaVersion":%d`, &v); err != nil {
		t.Fatalf("no schemaVersion at the start of %s: %v", doc, err)
	}
	return v
}
