package engine

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestIdentityNeedsSchemaVersionThree: registered agents and a freeze of
// every agent make a bundle version 3, which a sidecar that does not know
// them refuses (and keeps its last bundle) rather than serving it without
// them; a document claiming version 2 with either is corrupt.
func TestIdentityNeedsSchemaVersionThree(t *testing.T) {
	t.Parallel()
	for name, b := range map[string]Bundle{
		"identity":           {Policies: []Policy{allowAll("p")}, Identity: &Identity{Agents: []Agent{{Name: "a", ServiceAccount: "sa", ID: "a"}}}},
		"empty identity":     {Policies: []Policy{allowAll("p")}, Identity: &Identity{}},
		"every agent frozen": {Policies: []Policy{allowAll("p")}, FrozenAgents: []FrozenAgent{{All: true}}},
	} {
		t.Run(name, func(t *testing.T) {
			doc, _, err := Encode(b)
			if err != nil {
				t.Fatal(err)
			}
			var head struct {
				SchemaVersion int `json:"schemaVersion"`
			}
			if err := json.Unmarshal(doc, &head); err != nil || head.SchemaVersion != 3 {
				t.Fatalf("schemaVersion %d (%v), want 3: %s", head.SchemaVersion, err, doc)
			}
			if _, err := Decode(doc); err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if _, err := Decode(withSchemaVersion(t, doc, 2)); !errors.Is(err, ErrCorruptBundle) {
				t.Errorf("claiming version 2: %v, want corrupt", err)
			}
		})
	}
	doc, _, err := Encode(Bundle{Policies: []Policy{allowAll("p")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(withSchemaVersion(t, doc, 3)); !errors.Is(err, ErrCorruptBundle) {
		t.Errorf("a bundle without identity claiming version 3: %v, want corrupt", err)
	}
}

// TestIdentityEncodesCanonically: agents, upstreams, roles and upstream
// names in any order give one document and one revision, so a publisher
// does not re-publish a namespace whose objects were listed in another
// order.
func TestIdentityEncodesCanonically(t *testing.T) {
	t.Parallel()
	a := &Identity{Environment: "prod",
		Agents:    []Agent{{Name: "b", ServiceAccount: "sb", ID: "b", Roles: []string{"y", "x"}, Upstreams: []string{"jira", "github"}}, {Name: "a", ServiceAccount: "sa", ID: "a"}},
		Upstreams: []Upstream{{Name: "jira", URL: "http://j"}, {Name: "github", URL: "http://g"}}}
	b := &Identity{Environment: "prod",
		Agents:    []Agent{{Name: "a", ServiceAccount: "sa", ID: "a", Roles: []string{}}, {Name: "b", ServiceAccount: "sb", ID: "b", Roles: []string{"x", "y"}, Upstreams: []string{"github", "jira"}}},
		Upstreams: []Upstream{{Name: "github", URL: "http://g"}, {Name: "jira", URL: "http://j"}}}
	docA, revA, errA := Encode(Bundle{Identity: a})
	docB, revB, errB := Encode(Bundle{Identity: b})
	if errA != nil || errB != nil || revA != revB || string(docA) != string(docB) {
		t.Errorf("equal identities encode differently:\n%s %s\n%s %s", docA, revA, docB, revB)
	}
	if a.Agents[0].Name != "b" || a.Agents[0].Roles[0] != "y" {
		t.Error("Encode reordered its argument")
	}
	got, ok := b.AgentFor("sb")
	if !ok || got.ID != "b" {
		t.Errorf("AgentFor(sb) = %+v %v", got, ok)
	}
	if _, ok := b.AgentFor(""); ok {
		t.Error("the empty ServiceAccount has an Agent")
	}
	if url, ok := b.UpstreamURL("jira"); !ok || url != "http://j" {
		t.Errorf("UpstreamURL(jira) = %q %v", url, ok)
	}
}
