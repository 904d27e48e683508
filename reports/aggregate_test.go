package reports

import (
	"strings"
	"testing"
	"time"
)

// clock is a settable clock for the aggregator.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func rec(at time.Time, agent, tool, decision, effect, policy, rule string) *Record {
	return &Record{At: at, Agent: agent, Tool: tool, Decision: decision, Effect: effect, PolicyID: policy, RuleID: rule}
}

func TestVerdictMapsEffectsToResults(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ decision, effect, want string }{
		{"allow", "allow", ResultPass},
		{"deny", "deny", ResultFail},
		{"allow", "warn", ResultWarn},
		{"allow", "audit", ResultSkip},
		{"allow", "redact", ResultWarn},
		{"allow", "ask", ResultPass},
		{"deny", "ask", ResultFail},
		{"ask", "ask", ResultWarn},
		{"deny", "something-new", ResultFail},
	} {
		if got := verdict(c.decision, c.effect); got != c.want {
			t.Errorf("decision %s effect %s: %s, want %s", c.decision, c.effect, got, c.want)
		}
	}
}

func TestAggregatorCountsPerPolicyRuleAndResult(t *testing.T) {
	t.Parallel()
	c := &clock{t0}
	a := NewAggregator(AggregatorOptions{Now: c.now})
	a.Add("ns", rec(t0.Add(-3*time.Minute), "a1", "pay", "deny", "deny", "pay-cap", "over"))
	a.Add("ns", rec(t0.Add(-1*time.Minute), "a2", "pay", "deny", "deny", "pay-cap", "over"))
	a.Add("ns", rec(t0.Add(-2*time.Minute), "a3", "refund", "deny", "deny", "pay-cap", "over")) // older: not the last example
	a.Add("ns", rec(t0, "a1", "read", "allow", "allow", "", ""))
	a.Add("ns", &Record{At: t0, Agent: "a9", Tool: "x", Decision: "deny", Effect: "deny", Code: "FROZEN"})
	a.Add("ns", &Record{At: t0, Agent: "a4", Tool: "rm", Decision: "allow", Effect: "allow",
		Shadow: []ShadowVerdict{{Kind: "ClusterPolicy", Policy: "guard", Decision: "deny", Rule: "no-rm"}}})
	a.Add("other", rec(t0, "b", "pay", "allow", "warn", "pay-cap", "big"))
	got := a.Results("ns")
	want := []Result{
		{Key: Key{"", NoPolicy, "FROZEN", ResultFail}, Count: 1, Agent: "a9", Tool: "x", Last: t0},
		{Key: Key{"", NoPolicy, "default", ResultPass}, Count: 2, Agent: "a4", Tool: "rm", Last: t0},
		{Key: Key{"", "pay-cap", "over", ResultFail}, Count: 3, Agent: "a2", Tool: "pay", Last: t0.Add(-time.Minute)},
		{Key: Key{"ClusterPolicy", "guard", "no-rm", ResultSkip}, Count: 1, Agent: "a4", Tool: "rm", Last: t0},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d results, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("result %d:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	if ns := a.Namespaces(); strings.Join(ns, ",") != "ns,other" && strings.Join(ns, ",") != "other,ns" {
		t.Errorf("namespaces %v", ns)
	}
}

func TestAggregatorWindowExpires(t *testing.T) {
	t.Parallel()
	c := &clock{t0}
	a := NewAggregator(AggregatorOptions{Window: time.Hour, Now: c.now})
	a.Add("ns", rec(t0, "a", "pay", "deny", "deny", "p", "r"))
	c.t = t0.Add(30 * time.Minute)
	a.Add("ns", rec(c.t, "a", "pay", "deny", "deny", "p", "r"))
	c.t = t0.Add(time.Hour + time.Minute) // the first decision left the window
	a.Expire()
	if got := a.Results("ns"); len(got) != 1 || got[0].Count != 1 {
		t.Fatalf("after an hour: %+v, want one result counting 1", got)
	}
	c.t = t0.Add(91 * time.Minute)
	a.Expire()
	if got := a.Results("ns"); len(got) != 0 {
		t.Fatalf("after both left the window: %+v", got)
	}
	if ns := a.Namespaces(); len(ns) != 0 {
		t.Errorf("an empty namespace is kept: %v", ns)
	}
	a.Add("ns", rec(t0, "a", "pay", "deny", "deny", "p", "r")) // arrives 91 minutes late
	if d := a.Drops(); d.TooOld != 1 {
		t.Errorf("drops %+v, want one too old", d)
	}
}

func TestAggregatorClampsFutureTimes(t *testing.T) {
	t.Parallel()
	c := &clock{t0}
	a := NewAggregator(AggregatorOptions{Now: c.now})
	a.Add("ns", rec(t0.Add(24*time.Hour), "a", "pay", "allow", "allow", "p", "r"))
	got := a.Results("ns")
	if len(got) != 1 || !got[0].Last.Equal(t0) {
		t.Fatalf("a decision from the future: %+v, want it counted now", got)
	}
}

func TestAggregatorBoundsEntries(t *testing.T) {
	t.Parallel()
	c := &clock{t0}
	a := NewAggregator(AggregatorOptions{MaxEntries: 3, MaxEntriesPerNamespace: 2, Now: c.now})
	a.Add("a", rec(t0, "x", "t", "allow", "allow", "p", "r1"))
	a.Add("a", rec(t0, "x", "t", "allow", "allow", "p", "r2"))
	a.Add("a", rec(t0, "x", "t", "allow", "allow", "p", "r3")) // namespace a is full
	if d := a.Drops(); d.NamespaceFull != 1 {
		t.Fatalf("drops %+v, want one for a full namespace", d)
	}
	a.Add("a", rec(t0, "x", "t", "allow", "allow", "p", "r1")) // r1 is now the most recent
	a.Add("b", rec(t0, "x", "t", "allow", "allow", "p", "r1"))
	a.Add("b", rec(t0, "x", "t", "allow", "allow", "p", "r2")) // evicts a/r2, the least recent
	if d := a.Drops(); d.Evicted != 1 {
		t.Fatalf("drops %+v, want one eviction", d)
	}
	got := a.Results("a")
	if len(got) != 1 || got[0].Rule != "r1" || got[0].Count != 2 {
		t.Fatalf("namespace a kept %+v, want r1 counting 2", got)
	}
	if got := a.Results("b"); len(got) != 2 {
		t.Fatalf("namespace b kept %+v", got)
	}
}

func TestCheckWindowAndFormat(t *testing.T) {
	t.Parallel()
	for _, w := range []time.Duration{0, time.Second, 8 * 24 * time.Hour} {
		if err := CheckWindow(w); err == nil || !strings.Contains(err.Error(), "from 1m to 168h") {
			t.Errorf("window %s: %v", w, err)
		}
	}
	if err := CheckWindow(time.Hour); err != nil {
		t.Error(err)
	}
	if err := CheckFormat("policyreport"); err == nil || !strings.Contains(err.Error(), "openreports or wgpolicyk8s") {
		t.Errorf("format: %v", err)
	}
}

func TestParseBatchRefusesMalformedInput(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ body, want string }{
		{``, "not a JSON array"},
		{`{"time":"2026-03-01T12:00:00Z"}`, "not a JSON array"},
		{`[1,2`, "not a JSON array"},
		{`[{"tool_name":"t","decision":"allow","effect":"allow"}]`, `line 0: no "time"`},
		{`[{"time":"2026-03-01T12:00:00Z","decision":"allow","effect":"allow"}]`, `line 0: no "tool_name"`},
		{`[{"time":"2026-03-01T12:00:00Z","tool_name":"t","effect":"allow"}]`, `no "decision"`},
		{`[{"time":"2026-03-01T12:00:00Z","tool_name":"t","decision":"allow"}]`, `no "effect"`},
		{`[{"time":"yesterday","tool_name":"t","decision":"allow","effect":"allow"}]`, "line 0: not a decision log line"},
		{`[{"time":"2026-03-01T12:00:00Z","tool_name":"t","decision":"allow","effect":"allow","shadow":[{"decision":"deny"}]}]`, "names no policy"},
		{`[` + strings.Repeat(`{},`, MaxBatchRecords) + `{}]`, "more than 10000"},
	} {
		_, err := ParseBatch([]byte(c.body))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.60s: error %v, want one saying %q", c.body, err, c.want)
		}
	}
}

func TestBuildWritesBothFormats(t *testing.T) {
	t.Parallel()
	results := []Result{
		{Key: Key{"", "pay-cap", "over", ResultFail}, Count: 3, Agent: "shop", Tool: "pay", Last: t0},
		{Key: Key{"ClusterPolicy", "guard", "no-rm", ResultSkip}, Count: 1, Agent: "ops", Tool: "rm", Last: t0},
	}
	for _, format := range []string{FormatOpenReports, FormatWGPolicy} {
		u := Build(format, "ns", results, time.Hour)
		if u.GroupVersionKind() != GVK(format) || u.GetName() != "toolgate" || u.GetNamespace() != "ns" {
			t.Errorf("%s: %s %s/%s", format, u.GroupVersionKind(), u.GetNamespace(), u.GetName())
		}
		_, hasSource := u.Object["source"]
		if hasSource != (format == FormatOpenReports) {
			t.Errorf("%s: top-level source present %v: only openreports has one", format, hasSource)
		}
		summary := u.Object["summary"].(map[string]any)
		if summary["fail"] != int64(3) || summary["skip"] != int64(1) || summary["pass"] != int64(0) {
			t.Errorf("%s: summary %v", format, summary)
		}
		first := u.Object["results"].([]any)[0].(map[string]any)
		if first["message"] != "3 calls denied in the last 1h; the last: shop calling pay" {
			t.Errorf("%s: message %q", format, first["message"])
		}
		if p := first["properties"].(map[string]any); p["count"] != "3" || p["agent"] != "shop" || p["tool"] != "pay" {
			t.Errorf("%s: properties %v", format, p)
		}
		second := u.Object["results"].([]any)[1].(map[string]any)
		if second["properties"].(map[string]any)["kind"] != "ClusterPolicy" {
			t.Errorf("%s: a ClusterPolicy's result does not say so: %v", format, second)
		}
	}
}

func TestOnlyServiceAccountsReport(t *testing.T) {
	t.Parallel()
	if ns, err := serviceAccountNamespace("system:serviceaccount:agents:shop"); err != nil || ns != "agents" {
		t.Errorf("a ServiceAccount: %q, %v", ns, err)
	}
	for _, user := range []string{"alice", "system:serviceaccount:agents", "system:serviceaccount:agents:", "system:serviceaccount:Not_A_Namespace:sa", "system:node:n1"} {
		if _, err := serviceAccountNamespace(user); err == nil || !strings.Contains(err.Error(), "only sidecars' ServiceAccount tokens may report") {
			t.Errorf("%q: %v", user, err)
		}
	}
}
