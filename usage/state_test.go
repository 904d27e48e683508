package usage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
)

// openState opens a new ledger on the state file at path, at now.
func openState(t *testing.T, path string, maxKeys int, now time.Time) (*Ledger, StateLoad) {
	t.Helper()
	l := newLedger(t, maxKeys, 16)
	load, err := l.OpenState(path, now)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.CloseState() })
	return l, load
}

// TestStateKeepsEveryCountAcrossARestart: a second ledger opened on the
// file of a first (not closed: a killed process) counts what the first
// did, the calls appended after its snapshot included, and its limits
// hold.
func TestStateKeepsEveryCountAcrossARestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "usage")
	c := limited(t, "1h")
	first, load := openState(t, path, 64, t0)
	if load.Unreadable != nil || load.Counters != 0 {
		t.Fatalf("a fresh file: %+v", load)
	}
	now := t0
	for i := range 10 {
		now = now.Add(time.Second)
		if _, err := decideAt(first, c, call("shop", fmt.Sprint("s-", i%3), "pay", 7), now); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 {
		if _, err := decideAt(first, c, call("shop", "s-9", "Bash", 0), now); err != nil {
			t.Fatal(err)
		}
	}
	second, load := openState(t, path, 64, now)
	if load.Unreadable != nil || load.Counters != 0 || load.Calls != 12 {
		t.Fatalf("reopened: %+v, want 12 calls appended after an empty snapshot", load)
	}
	checkOwners(t, second)
	for _, l := range []*Ledger{first, second} {
		if got := l.Calls(agentKey("shop"), "pay", time.Hour, now); got != 10 {
			t.Errorf("pay: %d calls, want 10", got)
		}
		if got := l.Tokens(agentKey("shop"), time.Hour, now); got != 70 {
			t.Errorf("tokens: %v, want 70", got)
		}
		if got := l.Calls(sessionKey("s-1"), "pay", time.Hour, now); got != 3 {
			t.Errorf("session s-1: %d calls, want 3", got)
		}
	}
	if res, err := decideAt(second, c, call("shop", "s-x", "pay", 0), now); res.MatchedRuleID != "pay-hourly" || err != nil {
		t.Errorf("pay after the restart: %+v %v, want deny by pay-hourly", res, err)
	}
	if res, err := decideAt(second, c, call("shop", "s-9", "Bash", 0), now); res.MatchedRuleID != "bash-twice" || err != nil {
		t.Errorf("Bash after the restart: %+v %v, want deny by bash-twice", res, err)
	}
	// The restart wrote a snapshot: a third ledger restores counters.
	third, load := openState(t, path, 64, now)
	checkOwners(t, third)
	if load.Counters != second.Keys() || load.Calls != 0 || third.Calls(agentKey("shop"), "pay", time.Hour, now) != 10 {
		t.Errorf("from the snapshot: %+v, %d calls; want %d counters and 10 calls", load, third.Calls(agentKey("shop"), "pay", time.Hour, now), second.Keys())
	}
}

// TestStateIsWrittenAnewAndStillCounts: appended calls past the snapshot's
// size (and 1 MiB) make a new snapshot, so the file stays small and counts
// the same.
func TestStateIsWrittenAnewAndStillCounts(t *testing.T) {
	path := filepath.Join(t.TempDir(), "usage")
	c := limited(t, "1h")
	l, _ := openState(t, path, 64, t0)
	now := t0
	const calls = 60_000 // about 2.7 MB of calls appended: written anew at least once
	for range calls {
		now = now.Add(time.Millisecond)
		if _, err := decideAt(l, c, call("shop", "s", "Read", 1), now); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(path)
	must(t, err)
	if fi.Size() > 2*compactMin {
		t.Errorf("the file holds %d bytes after %d calls; it is never written anew", fi.Size(), calls)
	}
	again, _ := openState(t, path, 64, now)
	for _, k := range []engine.UsageKey{agentKey("shop"), sessionKey("s")} {
		want, got := l.Tokens(k, time.Hour, now), again.Tokens(k, time.Hour, now)
		if want < calls || got != want {
			t.Errorf("%+v: %v tokens after reopening, %v before (%d calls)", k, got, want, calls)
		}
	}
}

// TestUnreadableStateFailsClosed: a state file that is not whole (cut
// short, a byte changed, not a state file at all) is never read as zero:
// the ledger starts empty, moves the file aside, and denies every limited
// call whose window reaches back before the start, until it has passed;
// a restart in between remembers it.
func TestUnreadableStateFailsClosed(t *testing.T) {
	c := limited(t, "1h")
	whole := func(t *testing.T) []byte {
		path := filepath.Join(t.TempDir(), "usage")
		l, _ := openState(t, path, 64, t0)
		for range 10 {
			if _, err := decideAt(l, c, call("shop", "s", "pay", 0), t0); err != nil {
				t.Fatal(err)
			}
		}
		_ = l.CloseState()
		data, err := os.ReadFile(path)
		must(t, err)
		return data
	}
	for _, tc := range []struct {
		name   string
		damage func([]byte) []byte
		want   string
	}{
		{"cut short", func(b []byte) []byte { return b[:len(b)-5] }, "cut short"},
		{"a byte changed", func(b []byte) []byte { b[len(b)-20] ^= 1; return b }, "checksum"},
		{"not a state file", func([]byte) []byte { return []byte(`{"counters":[]}`) }, "not a toolgate usage state file"},
		{"empty", func([]byte) []byte { return nil }, "not a toolgate usage state file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "usage")
			must(t, os.WriteFile(path, tc.damage(whole(t)), 0o600))
			start := t0.Add(time.Minute)
			l, load := openState(t, path, 64, start)
			if load.Unreadable == nil || !strings.Contains(load.Unreadable.Error(), tc.want) || !load.UnknownBefore.Equal(start) {
				t.Fatalf("load %+v, want unreadable (%s) with calls unknown before the start", load, tc.want)
			}
			if _, err := os.Stat(load.MovedTo); err != nil {
				t.Errorf("the unreadable file was not kept aside: %v", err)
			}
			res, err := decideAt(l, c, call("shop", "s", "pay", 0), start.Add(time.Second))
			if !errors.Is(err, ErrUnavailable) {
				t.Fatalf("pay after an unreadable state: %+v %v, want ErrUnavailable", res, err)
			}
			t.Logf("denied: %v", err)
			// Calls no limit reads are decided as ever.
			if res, err := decideAt(l, c, call("shop", "s", "Read", 0), start.Add(time.Second)); res.Decision != engine.Allow || err != nil {
				t.Errorf("Read: %+v %v", res, err)
			}
			restarted, load := openState(t, path, 64, start.Add(time.Minute))
			if load.Unreadable != nil {
				t.Fatalf("the state written after the unreadable one: %v", load.Unreadable)
			}
			if _, err := decideAt(restarted, c, call("shop", "s", "pay", 0), start.Add(time.Minute)); !errors.Is(err, ErrUnavailable) {
				t.Errorf("pay after a second restart within the window: %v, want ErrUnavailable still", err)
			}
			if res, err := decideAt(restarted, c, call("shop", "s", "pay", 0), start.Add(time.Hour)); res.Decision != engine.Allow || err != nil {
				t.Errorf("pay once the hour since the start has passed: %+v %v, want allow", res, err)
			}
		})
	}
}

// TestAStatePathThatCannotBeWrittenIsAnError: the sidecar refuses to start
// rather than keep counters it cannot keep.
func TestAStatePathThatCannotBeWrittenIsAnError(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	must(t, os.WriteFile(file, nil, 0o600))
	l := newLedger(t, 64, 16)
	_, err := l.OpenState(filepath.Join(file, "usage"), t0)
	if err == nil || !strings.Contains(err.Error(), "--usage-state") {
		t.Fatalf("a state file under a regular file: %v, want an error naming --usage-state", err)
	}
}

// FuzzStateFile: whatever a state file holds, reading it never panics or
// hangs (a sidecar that crashed at start would restart forever) and never
// yields a ledger past its caps: it is restored whole, or refused (and
// OpenState then fails closed, TestUnreadableStateFailsClosed).
func FuzzStateFile(f *testing.F) {
	c := limited(f, "1h")
	path := filepath.Join(f.TempDir(), "seed")
	l := newLedger(f, 16, 4)
	if _, err := l.OpenState(path, t0); err != nil {
		f.Fatal(err)
	}
	for i := range 12 {
		if _, err := decideAt(l, c, call(fmt.Sprint("a", i%2), fmt.Sprint("s", i%5), "pay", float64(i%3)), t0.Add(time.Duration(i)*time.Minute)); err != nil {
			f.Fatal(err)
		}
	}
	appended, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	_ = l.CloseState()
	f.Add(appended)
	f.Add(l.snapshot())
	f.Add([]byte(stateMagic))
	// A namespace's counters (per: namespace), as a snapshot and appended.
	ns := newLedger(f, 16, 4)
	for i := range 6 {
		if err := ns.Record(call(fmt.Sprint("a", i%2), "s", "pay", float64(i)), t0.Add(time.Duration(i)*time.Minute)); err != nil {
			f.Fatal(err)
		}
	}
	f.Add(ns.snapshot())
	f.Add(callFile(ns, 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		l := newLedger(t, 8, 4)
		if _, _, err := l.restore(data); err != nil {
			return
		}
		checkOwners(t, l)
		if l.Keys() > 8 {
			t.Fatalf("%d counters past the cap of 8", l.Keys())
		}
		for _, s := range l.series {
			if s.n > 4 {
				t.Fatalf("a counter of %d events past the cap of 4", s.n)
			}
		}
		// What was restored is counted on as ever.
		if _, err := decideAt(l, c, call("a0", "s0", "pay", 1), t0.Add(2*time.Hour)); err != nil && !errors.Is(err, ErrUnavailable) {
			t.Fatal(err)
		}
	})
}
