package usage

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
)

// benchLedger holds one agent's calls to ten tools, 100 calls each within
// the hour.
func benchLedger(b *testing.B) *Ledger {
	l := newLedger(b, DefaultMaxKeys, DefaultMaxEventsPerKey)
	fillBenchLedger(l)
	return l
}

func fillBenchLedger(l *Ledger) {
	tools := []string{"pay", "Read", "Write", "Bash", "Grep", "Glob", "Edit", "WebFetch", "Task", "mcp__db__query"}
	for i := range 1000 {
		_ = l.Record(call("agent-1", "session-1", tools[i%len(tools)], 100), t0.Add(time.Duration(i)*time.Second))
	}
}

func BenchmarkCalls(b *testing.B) {
	l := benchLedger(b)
	k, now := agentKey("agent-1"), t0.Add(1000*time.Second)
	b.ReportAllocs()
	for b.Loop() {
		_ = l.Calls(k, "pay", time.Hour, now)
	}
}

func BenchmarkTokens(b *testing.B) {
	l := benchLedger(b)
	k, now := agentKey("agent-1"), t0.Add(1000*time.Second)
	b.ReportAllocs()
	for b.Loop() {
		_ = l.Tokens(k, time.Hour, now)
	}
}

// BenchmarkRecord records at the event cap, so every call also merges.
func BenchmarkRecord(b *testing.B) {
	l := benchLedger(b)
	req := call("agent-1", "session-1", "pay", 100)
	at := t0.Add(1000 * time.Second)
	b.ReportAllocs()
	for b.Loop() {
		at = at.Add(time.Millisecond)
		if err := l.Record(req, at); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDecide is a call under an agent rate limit that it stays under
// (the limit is high), so every call is read, allowed and recorded: the
// decision path the sidecar takes with limits in its bundle.
func BenchmarkDecide(b *testing.B) { benchDecide(b, false, engine.PerAgent) }

// BenchmarkDecidePerNamespace is BenchmarkDecide under a per: namespace
// limit: each call is also counted in the namespace's counters.
func BenchmarkDecidePerNamespace(b *testing.B) { benchDecide(b, false, engine.PerNamespace) }

// BenchmarkDecideWithState is BenchmarkDecide with a state file: each call
// counted is appended to it (one write), and now and then written anew.
func BenchmarkDecideWithState(b *testing.B) { benchDecide(b, true, engine.PerAgent) }

func benchDecide(b *testing.B, state bool, per string) {
	l := newLedger(b, DefaultMaxKeys, DefaultMaxEventsPerKey)
	if state {
		if _, err := l.OpenState(filepath.Join(b.TempDir(), "usage"), t0); err != nil {
			b.Fatal(err)
		}
		defer func() { _ = l.CloseState() }()
	}
	fillBenchLedger(l)
	c, diags := engine.Compile(engine.Bundle{Policies: []engine.Policy{{ID: "p", Version: 1, DefaultEffect: "allow", Rules: []engine.Rule{
		{ID: "cap", Effect: "deny", Targets: &engine.Targets{Tools: []string{"pay"}},
			When: &engine.When{RateLimit: &engine.Limit{Max: 1 << 40, Window: "1h", Per: per}}}}}}})
	if len(diags) > 0 {
		b.Fatal(diags)
	}
	req := call("agent-1", "session-1", "pay", 100)
	at := t0.Add(1000 * time.Second)
	opts := engine.EvalOptions{Now: func() time.Time { return at }}
	b.ReportAllocs()
	for b.Loop() {
		at = at.Add(time.Millisecond)
		if res, err := l.Decide(c, req, opts); res.Decision != engine.Allow || err != nil {
			b.Fatal(res, err)
		}
	}
}
