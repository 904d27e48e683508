package freeze

import (
	"math/rand/v2"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestObjectName(t *testing.T) {
	for id, want := range map[string]string{
		"billing-bot-7": "freeze-billing-bot-7",
		"bot":           "freeze-bot",
	} {
		if got := ObjectName(id); got != want {
			t.Errorf("ObjectName(%q) = %q, want %q", id, got, want)
		}
	}
	// Ids that differ only in what the name cannot hold get distinct names.
	seen := map[string]string{}
	for _, id := range []string{"bot", "Bot", "BOT", "bot.1", "bot_1", "bot-1", "@@@", "日本", strings.Repeat("x", 200), strings.Repeat("x", 201), "-bot-"} {
		name := ObjectName(id)
		if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 {
			t.Errorf("ObjectName(%q) = %q: %v", id, name, msgs)
		}
		if other, dup := seen[name]; dup {
			t.Errorf("%q and %q share the name %q", id, other, name)
		}
		seen[name] = id
		if ObjectName(id) != name {
			t.Errorf("ObjectName(%q) is not stable", id)
		}
	}
	rng := rand.New(rand.NewPCG(3, 5))
	alphabet := []rune("aZ09-_.@ é/")
	for range 2000 {
		r := make([]rune, 1+rng.IntN(300))
		for i := range r {
			r[i] = alphabet[rng.IntN(len(alphabet))]
		}
		if name := ObjectName(string(r)); len(validation.IsDNS1123Label(name)) > 0 {
			t.Fatalf("ObjectName(%q) = %q is not a valid name", string(r), name)
		}
	}
}
