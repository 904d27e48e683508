package usage

import (
	"testing"
	"time"
)

// benchLedger holds one agent's calls to ten tools, 100 calls each within
// the hour.
func benchLedger(b *testing.B) *Ledger {
	l := newLedger(b, DefaultMaxKeys, DefaultMaxEventsPerKey)
	tools := []string{"pay", "Read", "Write", "Bash", "Grep", "Glob", "Edit", "WebFetch", "Task", "mcp__db__query"}
	for i := range 1000 {
		l.Record(call("agent-1", "session-1", tools[i%len(tools)], 100), t0.Add(time.Duration(i)*time.Second))
	}
	return l
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
		l.Record(req, at)
	}
}
