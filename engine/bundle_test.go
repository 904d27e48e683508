package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

func sampleBundle() Bundle {
	expires := t0.Add(time.Hour)
	expiresElsewhere := expires.In(time.FixedZone("UTC+5", 5*3600))
	other := t0.Add(2 * time.Hour)
	return Bundle{
		Policies: []Policy{
			{ID: "b", Version: 1, Priority: 0, DefaultEffect: "allow", Rules: []Rule{denyRule("r", cond("a", "eq", "x"))}},
			samplePolicy(),
			{ID: "a", Version: 7, Priority: 0, DefaultEffect: "deny", Rules: []Rule{allowRule("r", cond("tool_name", "in", "Read"))}},
			{ID: "low", Version: 2, Priority: -3, DefaultEffect: "allow", Rules: []Rule{allowRule("all")}},
		},
		FrozenAgents: []FrozenAgent{
			{ID: "zed", Reason: "z"},
			{ID: "agent-1", Reason: "later", ExpiresAt: &other},
			{ID: "agent-1", Reason: "sooner", ExpiresAt: &expiresElsewhere},
			{ID: "Agent-2"},
		},
	}
}

func TestEncodeIsDeterministic(t *testing.T) {
	t.Parallel()
	base := sampleBundle()
	want, wantRev, err := Encode(base)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(wantRev) {
		t.Errorf("revision %q is not sha256:<hex>", wantRev)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		b := sampleBundle()
		rng.Shuffle(len(b.Policies), func(i, j int) { b.Policies[i], b.Policies[j] = b.Policies[j], b.Policies[i] })
		rng.Shuffle(len(b.FrozenAgents), func(i, j int) { b.FrozenAgents[i], b.FrozenAgents[j] = b.FrozenAgents[j], b.FrozenAgents[i] })
		before := slices.Clone(b.Policies)
		got, rev, err := Encode(b)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || rev != wantRev {
			t.Fatalf("input order changed the document:\n%s\n%s", got, want)
		}
		for i := range before {
			if b.Policies[i].ID != before[i].ID {
				t.Fatal("Encode reordered its caller's policies")
			}
		}
	}
	// Same instant, other zone: same document.
	b := sampleBundle()
	for i := range b.FrozenAgents {
		if e := b.FrozenAgents[i].ExpiresAt; e != nil {
			utc := e.UTC()
			b.FrozenAgents[i].ExpiresAt = &utc
		}
	}
	if got, _, _ := Encode(b); !bytes.Equal(got, want) {
		t.Errorf("time zone changed the document:\n%s\n%s", got, want)
	}
}

// TestEncodeDuplicateAgentIDs: two FrozenAgent objects may freeze the same
// agentId. Listers return objects in any order; the revision must not flip
// with it, or every resync republishes the bundle.
func TestEncodeDuplicateAgentIDs(t *testing.T) {
	t.Parallel()
	one := []FrozenAgent{{ID: "agent-1", Reason: "incident 1"}, {ID: "agent-1", Reason: "incident 2"}}
	two := []FrozenAgent{one[1], one[0]}
	_, r1, _ := Encode(Bundle{FrozenAgents: one})
	_, r2, _ := Encode(Bundle{FrozenAgents: two})
	if r1 != r2 {
		t.Errorf("same freezes in another order give another revision: %s vs %s", r1, r2)
	}
}

func TestEncodeShape(t *testing.T) {
	t.Parallel()
	doc, rev, err := Encode(Bundle{SchemaVersion: 99, Revision: "stale"})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	if m["schemaVersion"] != float64(SchemaVersionOrdered) || m["revision"] != rev {
		t.Errorf("header %v %v, want %d %s", m["schemaVersion"], m["revision"], SchemaVersionOrdered, rev)
	}
	if p, ok := m["policies"].([]any); !ok || len(p) != 0 {
		t.Errorf("policies = %#v, want []", m["policies"])
	}
	if f, ok := m["frozenAgents"].([]any); !ok || len(f) != 0 {
		t.Errorf("frozenAgents = %#v, want []", m["frozenAgents"])
	}
	// The revision is the digest of the document with an empty revision,
	// so anyone can verify it without this package.
	withoutRev := bytes.Replace(doc, []byte(`"revision":"`+rev+`",`), nil, 1)
	sum := sha256.Sum256(withoutRev)
	if "sha256:"+hex.EncodeToString(sum[:]) != rev {
		t.Errorf("revision %s is not the sha256 of %s", rev, withoutRev)
	}
	// Different content, different revision.
	b := sampleBundle()
	_, r1, _ := Encode(b)
	b.Policies[0].Rules[0].Effect = "allow"
	if _, r2, _ := Encode(b); r1 == r2 {
		t.Error("changing a rule's effect kept the revision")
	}
}

func TestEncodeDecodeRoundTrip(t *testing.T) {
	t.Parallel()
	in := sampleBundle()
	doc, rev, err := Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Decode(doc)
	if err != nil {
		t.Fatalf("Decode: %v\n%s", err, doc)
	}
	if out.Revision != rev || out.SchemaVersion != SchemaVersionOrdered {
		t.Errorf("decoded header %d %q, want %d %q", out.SchemaVersion, out.Revision, SchemaVersionOrdered, rev)
	}
	again, rev2, err := Encode(out)
	if err != nil || !bytes.Equal(again, doc) || rev2 != rev {
		t.Errorf("re-encoding changed the document (%v):\n%s\n%s", err, again, doc)
	}
	if len(out.Policies) != len(in.Policies) || len(out.FrozenAgents) != len(in.FrozenAgents) {
		t.Fatalf("decoded %d policies and %d freezes, want %d and %d",
			len(out.Policies), len(out.FrozenAgents), len(in.Policies), len(in.FrozenAgents))
	}
	for _, f := range out.FrozenAgents {
		if f.ExpiresAt != nil && f.ExpiresAt.Location() != time.UTC {
			t.Errorf("expiry %v is not UTC", f.ExpiresAt)
		}
	}
	// The decoded bundle decides exactly as the original.
	cin, cout := mustCompile(t, in), mustCompile(t, out)
	rng := rand.New(rand.NewPCG(5, 6))
	for range 300 {
		data := make([]byte, 64)
		for i := range data {
			data[i] = byte(rng.Uint32())
		}
		req := (&genSource{data: data}).request()
		for _, now := range []time.Time{t0, t0.Add(90 * time.Minute), t0.Add(3 * time.Hour)} {
			opts := EvalOptions{Now: fixedClock(now)}
			a, b := cin.Evaluate(req, opts), cout.Evaluate(req, opts)
			a.LatencyMs, b.LatencyMs = 0, 0
			if a.Decision != b.Decision || a.Code != b.Code || a.MatchedRuleID != b.MatchedRuleID || a.MatchedPolicyID != b.MatchedPolicyID {
				t.Fatalf("decoded bundle decides differently on %s: %+v vs %+v", mustJSON(req), a, b)
			}
		}
	}
	if cout.Revision() != rev {
		t.Errorf("Compiled.Revision() = %q, want %q", cout.Revision(), rev)
	}
}

func TestDecodeRejects(t *testing.T) {
	t.Parallel()
	good, rev, err := Encode(sampleBundle())
	if err != nil {
		t.Fatal(err)
	}
	replace := func(old, new string) []byte {
		if !bytes.Contains(good, []byte(old)) {
			t.Fatalf("%q not in the document", old)
		}
		return bytes.Replace(good, []byte(old), []byte(new), 1)
	}
	emptyDoc, _, _ := Encode(Bundle{})
	for _, tc := range []struct {
		name string
		doc  []byte
	}{
		{"empty", nil},
		{"not JSON", []byte("schemaVersion: 1")},
		{"truncated", good[:len(good)/2]},
		{"array", []byte(`[]`)},
		{"null", []byte(`null`)},
		{"string", []byte(`"bundle"`)},
		{"no schemaVersion", []byte(`{"revision":"x","policies":[],"frozenAgents":[]}`)},
		{"schemaVersion 0", replace(`"schemaVersion":1`, `"schemaVersion":0`)},
		{"schemaVersion 2", replace(`"schemaVersion":1`, `"schemaVersion":2`)},
		{"schemaVersion as string", replace(`"schemaVersion":1`, `"schemaVersion":"1"`)},
		{"unknown top-level field", replace(`"schemaVersion":1`, `"schemaVersion":1,"extra":true`)},
		{"unknown policy field", replace(`"id":"guard"`, `"id":"guard","owner":"x"`)},
		{"unknown rule field", replace(`"id":"no-rm-rf"`, `"id":"no-rm-rf","enabled":true`)},
		{"unknown condition field", replace(`"field":"tool_name"`, `"field":"tool_name","negate":true`)},
		{"unknown freeze field", replace(`"id":"zed"`, `"id":"zed","frozenBy":"me"`)},
		{"tampered effect", replace(`"effect":"deny"`, `"effect":"allow"`)},
		{"tampered value", replace(`"value":"pay"`, `"value":"PAY"`)},
		{"freeze removed", replace(`,{"id":"zed","reason":"z"}`, ``)},
		{"tampered revision", replace(rev, "sha256:"+strings.Repeat("0", 64))},
		{"no revision", replace(`"revision":"`+rev+`",`, ``)},
		{"trailing value", append(slices.Clone(good), []byte(` {}`)...)},
		{"trailing garbage", append(slices.Clone(good), []byte(` x`)...)},
		{"trailing brace", append(slices.Clone(good), '}')},
		{"trailing bracket", append(slices.Clone(emptyDoc), ']')},
		{"two documents", append(slices.Clone(good), good...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := Decode(tc.doc)
			if err == nil {
				t.Fatalf("decoded: %+v", b)
			}
			if !errors.Is(err, ErrCorruptBundle) {
				t.Errorf("error %v does not wrap ErrCorruptBundle", err)
			}
		})
	}
	if _, err := Decode(good); err != nil {
		t.Errorf("the untampered document fails: %v", err)
	}
	if _, err := Decode(append(slices.Clone(good), " \n\t"...)); err != nil {
		t.Errorf("trailing whitespace is not data: %v", err)
	}
}
