package engine

import (
	"strings"
	"testing"
)

// SameAgent is strings.EqualFold, which the issue defines freezes by, on
// ASCII, Unicode folding orbits and invalid UTF-8 alike.
func TestSameAgentIsEqualFold(t *testing.T) {
	ids := []string{"bot", "BOT", "Bot-7", "bot-7", "K", "k", "\u212a", "ß", "SS", "ſ", "s", "Σ", "σ", "ς",
		"é", "É", "\xff", "\xfe", "", "agent\u0130", "agenti"}
	for _, a := range ids {
		for _, b := range ids {
			if got, want := SameAgent(a, b), strings.EqualFold(a, b); got != want {
				t.Errorf("SameAgent(%q, %q) = %v, strings.EqualFold says %v", a, b, got, want)
			}
		}
	}
}

func FuzzSameAgent(f *testing.F) {
	f.Add("Bot", "bOT")
	f.Add("\u212a", "k")
	f.Fuzz(func(t *testing.T, a, b string) {
		if got, want := SameAgent(a, b), strings.EqualFold(a, b); got != want {
			t.Fatalf("SameAgent(%q, %q) = %v, strings.EqualFold says %v", a, b, got, want)
		}
	})
}
