package rego

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/engine"
)

// TestSharedAndNamespaceLimitsReadTheirOwnCounts (issue 30): a
// per-namespace limit reads namespace/window, and each shared limit its
// own counter, shared/per/LimitID (two shared limits of one scope and
// window are two counters in the store, unlike two local ones), and
// data.toolgate.counts lists every key.
func TestSharedAndNamespaceLimitsReadTheirOwnCounts(t *testing.T) {
	limit := func(id string, l engine.Limit, tokens bool) engine.Rule {
		w := &engine.When{RateLimit: &l}
		if tokens {
			w = &engine.When{TokenBudget: &l}
		}
		return engine.Rule{ID: id, Effect: "deny", When: w}
	}
	b := engine.Bundle{Policies: []engine.Policy{
		{ID: "pay", Version: 1, DefaultEffect: "allow", Rules: []engine.Rule{
			limit("local-ns", engine.Limit{Max: 5, Window: "1m", Per: engine.PerNamespace}, false),
			limit("shared-a", engine.Limit{Max: 5, Window: "1m", Store: engine.StoreShared}, false),
			limit("shared-b", engine.Limit{Max: 5, Window: "1m", Store: engine.StoreShared, FailOpen: true}, false),
			limit("shared-ns-budget", engine.Limit{Max: 500, Window: "1h", Per: engine.PerNamespace, Store: engine.StoreShared}, true),
		}},
		{ID: "cap", Kind: engine.KindClusterPolicy, Version: 1, DefaultEffect: "allow", Rules: []engine.Rule{
			limit("sessions", engine.Limit{Max: 3, Window: "1h", Per: engine.PerSession, Store: engine.StoreShared}, false),
		}},
	}}
	out, err := Export(b)
	if err != nil {
		t.Fatal(err)
	}
	var data struct {
		Toolgate struct {
			Counts struct{ Calls, Tokens []string }
		}
	}
	if err := json.Unmarshal(out.Data, &data); err != nil {
		t.Fatal(err)
	}
	calls := []string{"namespace/1m0s", "shared/agent/Policy/pay/shared-a/rateLimit", "shared/agent/Policy/pay/shared-b/rateLimit",
		"shared/session/ClusterPolicy/cap/sessions/rateLimit"}
	tokens := []string{"shared/namespace/Policy/pay/shared-ns-budget/tokenBudget"}
	got := data.Toolgate.Counts
	slices.Sort(calls)
	if !slices.Equal(got.Calls, calls) || !slices.Equal(got.Tokens, tokens) {
		t.Errorf("counts %+v, want calls %v and tokens %v", got, calls, tokens)
	}
	for _, read := range []string{`_calls("shared/agent/Policy/pay/shared-a/rateLimit") >= 5`, `_tokens("shared/namespace/Policy/pay/shared-ns-budget/tokenBudget") + _call_tokens > 500`} {
		if !strings.Contains(string(out.Policy), read) {
			t.Errorf("the Rego does not read %s", read)
		}
	}
}
