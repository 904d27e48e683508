package bundle_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestSealContinuesTheCounter: what the operator and `toolgate bundle
// --signing-key` sign with. An unchanged bundle keeps its signature byte for
// byte; a new one counts on from the last verified counter, and never below
// the clock; a previous signature nobody in the ring made, or garbage, is
// not continued from.
func TestSealContinuesTheCounter(t *testing.T) {
	ring := testenv.Keyring(t, 2)
	trusted := ring.Trusted()
	now := time.UnixMilli(1_800_000_000_000)
	counter := func(sig []byte, rev string) uint64 {
		t.Helper()
		s, err := trusted.Verify(sig, "agents", rev)
		if err != nil || s.KeyID != ring.Current().ID() {
			t.Fatalf("the sealed signature does not verify as the current key's: %+v, %v", s, err)
		}
		return s.Counter
	}

	first := ring.Seal("agents", "sha256:aa", nil, now)
	if got := counter(first, "sha256:aa"); got != uint64(now.UnixMilli()) {
		t.Fatalf("first counter %d, want the clock's %d", got, now.UnixMilli())
	}
	if again := ring.Seal("agents", "sha256:aa", first, now.Add(time.Hour)); !bytes.Equal(again, first) {
		t.Fatal("an unchanged bundle was signed anew: its publisher would rewrite it")
	}
	// A clock behind the last counter: the next one above it.
	future := ring.Current().Sign("agents", "sha256:aa", uint64(now.UnixMilli())+5000)
	if got := counter(ring.Seal("agents", "sha256:bb", future, now), "sha256:bb"); got != uint64(now.UnixMilli())+5001 {
		t.Fatalf("after counter now+5000 the next is %d", got)
	}
	// Signed by another key of the ring (before a promote): continued too.
	byOld := ring.Keys()[1].Sign("agents", "sha256:aa", uint64(now.UnixMilli())+7000)
	if got := counter(ring.Seal("agents", "sha256:aa", byOld, now), "sha256:aa"); got != uint64(now.UnixMilli())+7001 {
		t.Fatalf("re-signed from the other key's counter now+7000: %d", got)
	}
	for name, prev := range map[string][]byte{
		"by a key outside the ring": testenv.Keyring(t, 1).Current().Sign("agents", "sha256:aa", 1<<62),
		"for another namespace":     ring.Current().Sign("prod", "sha256:aa", 1<<62),
		"not a signature":           []byte(`{"keyid":`),
	} {
		if got := counter(ring.Seal("agents", "sha256:aa", prev, now), "sha256:aa"); got != uint64(now.UnixMilli()) {
			t.Errorf("previous signature %s: counter %d, want the clock's", name, got)
		}
	}
}
