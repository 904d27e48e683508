package engine

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"
)

// schemaV1Bundle uses every field a bundle had before issue 9 (priorities,
// default effects, descriptions, value and values, freezes by id and by
// ServiceAccount, an expiry), and none of the new ones.
func schemaV1Bundle() Bundle {
	expires := time.Date(2026, 11, 3, 13, 0, 0, 0, time.UTC)
	return Bundle{
		Policies: []Policy{
			{ID: "guard", Version: 4, Priority: 10, DefaultEffect: "allow", Rules: []Rule{
				{ID: "no-rm", Effect: "deny", Description: "rm -rf is never allowed", Conditions: []Condition{
					{Field: "tool_name", Operator: "eq", Value: json.RawMessage(`"Bash"`)},
					{Field: "input.command", Operator: "matches", Value: json.RawMessage(`"rm\\s+-rf"`)},
				}},
				{ID: "reads", Effect: "allow", Conditions: []Condition{
					{Field: "tool_name", Operator: "in", Values: []json.RawMessage{json.RawMessage(`"Read"`), json.RawMessage(`"Grep"`)}},
				}},
			}},
			{ID: "base", Version: 1, DefaultEffect: "deny", Rules: []Rule{{ID: "all", Effect: "allow"}}},
		},
		FrozenAgents: []FrozenAgent{
			{ID: "agent-1", Reason: "incident", ExpiresAt: &expires},
			{ServiceAccount: "billing-bot"},
		},
	}
}

// schemaV1Revision is schemaV1Bundle's revision computed on main before
// issue 9 (commit 62c4617): sidecars not yet upgraded must keep receiving
// byte-identical bundles for policies that do not use the new fields.
const schemaV1Revision = "sha256:c1c547137140394ea49fb2792029897909dd66fbe252b74bcb94587d3e71b43b"

func TestSchemaVersionOneUnchanged(t *testing.T) {
	t.Parallel()
	doc, rev, err := Encode(schemaV1Bundle())
	if err != nil {
		t.Fatal(err)
	}
	if rev != schemaV1Revision {
		t.Errorf("revision %s, want %s (as before issue 9)\n%s", rev, schemaV1Revision, doc)
	}
	var head struct {
		SchemaVersion int `json:"schemaVersion"`
	}
	if err := json.Unmarshal(doc, &head); err != nil || head.SchemaVersion != 1 {
		t.Errorf("schemaVersion %d (%v), want 1", head.SchemaVersion, err)
	}
	for _, absent := range []string{`"evaluation"`, `"subjects"`, `"targets"`, `"select"`, `"when"`, `"any":`, `"all":`} {
		if strings.Contains(string(doc), absent) {
			t.Errorf("a version 1 document mentions %s: %s", absent, doc)
		}
	}
	b, err := Decode(doc)
	if err != nil {
		t.Fatal(err)
	}
	if b.SchemaVersion != 1 {
		t.Errorf("decoded schemaVersion %d", b.SchemaVersion)
	}
}

// TestSchemaVersionTwo: any one new field makes a bundle version 2.
func TestSchemaVersionTwo(t *testing.T) {
	t.Parallel()
	rule := func(f func(*Rule)) func(*Bundle) { return func(b *Bundle) { f(&b.Policies[1].Rules[0]) } }
	for _, tc := range []struct {
		name   string
		mutate func(*Bundle)
	}{
		{"tiered", func(b *Bundle) { b.Policies[1].Evaluation = EvaluationTiered }},
		{"evaluation ordered written out", func(b *Bundle) { b.Policies[1].Evaluation = EvaluationOrdered }},
		{"rule priority", rule(func(r *Rule) { r.Priority = 5 })},
		{"negative rule priority", rule(func(r *Rule) { r.Priority = -1 })},
		{"warn", rule(func(r *Rule) { r.Effect = "warn" })},
		{"audit", rule(func(r *Rule) { r.Effect = "audit" })},
		{"subjects", rule(func(r *Rule) { r.Subjects = &Subjects{Roles: []string{"ci"}} })},
		{"targets", rule(func(r *Rule) { r.Targets = &Targets{Servers: []string{"db"}} })},
		{"select", rule(func(r *Rule) { r.Select = &Select{Tool: "Bash"} })},
		{"when", rule(func(r *Rule) { r.When = &When{Environments: []string{"prod"}} })},
		{"any", rule(func(r *Rule) { r.Conditions = []Condition{{Any: []Condition{cond("a", "eq", 1)}}} })},
		{"all", rule(func(r *Rule) { r.Conditions = []Condition{{Any: []Condition{{All: []Condition{cond("a", "eq", 1)}}}}} })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := schemaV1Bundle()
			tc.mutate(&b)
			doc, rev, err := Encode(b)
			if err != nil {
				t.Fatal(err)
			}
			var head struct {
				SchemaVersion int `json:"schemaVersion"`
			}
			if err := json.Unmarshal(doc, &head); err != nil || head.SchemaVersion != 2 {
				t.Errorf("schemaVersion %d (%v), want 2: %s", head.SchemaVersion, err, doc)
			}
			if rev == schemaV1Revision {
				t.Errorf("revision did not change")
			}
			got, err := Decode(doc)
			if err != nil {
				t.Fatalf("Decode: %v\n%s", err, doc)
			}
			if again, rev2, err := Encode(got); err != nil || rev2 != rev || !bytes.Equal(again, doc) {
				t.Errorf("round trip changed the document (%v):\n%s\n%s", err, doc, again)
			}
			// The same document claiming version 1 (with its revision
			// recomputed, so only the version is wrong) is refused, as
			// are versions 3 and 0.
			for _, v := range []int{1, 3, 0} {
				if _, err := Decode(withSchemaVersion(t, doc, v)); !errors.Is(err, ErrCorruptBundle) {
					t.Errorf("version %d accepted (%v)", v, err)
				}
			}
			if _, err := Decode(withSchemaVersion(t, doc, 2)); err != nil {
				t.Errorf("re-signing at version 2 broke the document: %v", err)
			}
		})
	}
}

// TestSchemaVersionClaims: a version 1 bundle claiming 2 or 3 is refused:
// Decode accepts exactly the version the content needs.
func TestSchemaVersionClaims(t *testing.T) {
	t.Parallel()
	doc, _, err := Encode(schemaV1Bundle())
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []int{2, 3, -1} {
		if _, err := Decode(withSchemaVersion(t, doc, v)); !errors.Is(err, ErrCorruptBundle) {
			t.Errorf("version %d accepted for a version 1 bundle (%v)", v, err)
		}
	}
	if _, err := Decode(withSchemaVersion(t, doc, 1)); err != nil {
		t.Errorf("re-signing at version 1 broke the document: %v", err)
	}
}

// withSchemaVersion rewrites doc's schemaVersion and recomputes its
// revision the way Encode defines it (sha256 of the document without one),
// so Decode can only object to the version.
func withSchemaVersion(t *testing.T, doc []byte, v int) []byte {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(doc, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "revision")
	// Field order matters to the hash: the Bundle struct's order.
	order := []string{"schemaVersion", "policies", "frozenAgents"}
	m["schemaVersion"] = json.RawMessage(strconv.Itoa(v))
	write := func(rev string) []byte {
		var buf bytes.Buffer
		buf.WriteString(`{"schemaVersion":`)
		buf.Write(m["schemaVersion"])
		if rev != "" {
			buf.WriteString(`,"revision":`)
			buf.WriteString(strconv.Quote(rev))
		}
		for _, k := range order[1:] {
			buf.WriteString(`,"` + k + `":`)
			buf.Write(m[k])
		}
		buf.WriteString("}")
		return buf.Bytes()
	}
	sum := sha256.Sum256(write(""))
	return write("sha256:" + hex.EncodeToString(sum[:]))
}
