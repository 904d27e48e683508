package regodiff

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/scenario"
	torego "github.com/toolgate/toolgate/rego"
)

// BenchmarkExportedDecision is OPA (as a library) deciding
// data.toolgate.decision on the exported 1000-rule reference scenario (the
// request denied by rule 500), alone and with what ClusterPolicies,
// PolicyExceptions and Audit policies add. one-level is the Rego every
// bundle without them gets; docs/opa.md quotes these figures.
func BenchmarkExportedDecision(b *testing.B) {
	until := time.Now().Add(24 * time.Hour)
	exception := func(agent string) engine.Exception {
		return engine.Exception{Name: "x", Policy: "p", RuleIDs: []string{"r500"}, AgentIDs: []string{agent}, ExpiresAt: until}
	}
	withCluster := func(bu *engine.Bundle) {
		org := scenario.Reference(100).Policies[0]
		org.ID, org.Kind = "org", engine.KindClusterPolicy
		bu.Policies = append(bu.Policies, org)
	}
	for _, c := range []struct {
		name string
		add  func(*engine.Bundle)
	}{
		{"one-level", func(*engine.Bundle) {}},
		{"cluster-100-rules", withCluster},
		{"exception-not-in-force", func(bu *engine.Bundle) { bu.Exceptions = []engine.Exception{exception("other")} }},
		{"exception-applied", func(bu *engine.Bundle) { bu.Exceptions = []engine.Exception{exception("agent-1")} }},
		{"audit-1000-rules", func(bu *engine.Bundle) {
			shadow := scenario.Reference(1000).Policies[0]
			shadow.ID, shadow.Mode = "candidate", engine.ModeAudit
			bu.Policies = append(bu.Policies, shadow)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			bu := scenario.Reference(1000)
			c.add(&bu)
			out, err := torego.Export(bu)
			if err != nil {
				b.Fatal(err)
			}
			var doc map[string]any
			if err := json.Unmarshal(out.Data, &doc); err != nil {
				b.Fatal(err)
			}
			q, err := rego.New(rego.Query("data.toolgate.decision"), rego.Module(torego.PolicyFile, string(out.Policy)),
				rego.Store(inmem.NewFromObject(doc))).PrepareForEval(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			var input map[string]any
			if err := json.Unmarshal([]byte(scenario.Request), &input); err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				rs, err := q.Eval(context.Background(), rego.EvalInput(input))
				if err != nil || len(rs) != 1 {
					b.Fatalf("no decision: %v", err)
				}
			}
		})
	}
}
