// Package bundle turns Policy and FrozenAgent resources into the engine's
// bundle. The operator, the CLI and `toolgate bundle` all call Build, so what
// a user evaluates offline is exactly what the cluster publishes.
package bundle

import (
	"time"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/engine"
)

// Build converts one namespace's resources into an engine bundle, in
// canonical order. Frozen agents whose expiresAt is not after now are left
// out: they no longer apply and republishing without them is what expiry
// means. A zero now keeps every freeze.
func Build(policies []v1alpha1.Policy, frozen []v1alpha1.FrozenAgent, now time.Time) engine.Bundle {
	b := engine.Bundle{
		Policies: make([]engine.Policy, 0, len(policies)), FrozenAgents: make([]engine.FrozenAgent, 0, len(frozen))}
	for i := range policies {
		b.Policies = append(b.Policies, Policy(&policies[i]))
	}
	for i := range frozen {
		f := FrozenAgent(&frozen[i])
		if !now.IsZero() && f.Expired(now) {
			continue
		}
		b.FrozenAgents = append(b.FrozenAgents, f)
	}
	b.Sort()
	b.SchemaVersion = b.NeededSchemaVersion()
	return b
}

// Policy converts one Policy; its id is metadata.name and its version
// metadata.generation; omitted fields get engine.Policy.WithDefaults (so the
// default defaultEffect follows evaluation, which a CRD default could not).
// An explicit evaluation: ordered is written as "", what the engine reads as
// ordered: the bundle stays the one it was before the field existed (same
// schema version and revision), so sidecars not yet upgraded keep serving it.
func Policy(p *v1alpha1.Policy) engine.Policy {
	out := engine.Policy{ID: p.Name, Version: p.Generation, Priority: p.Spec.Priority,
		DefaultEffect: string(p.Spec.DefaultEffect), Rules: make([]engine.Rule, 0, len(p.Spec.Rules))}
	if p.Spec.Evaluation != v1alpha1.EvaluationOrdered {
		out.Evaluation = string(p.Spec.Evaluation)
	}
	if p.Spec.Mode == v1alpha1.PolicyModeAudit {
		out.Mode = engine.ModeAudit
	}
	for i := range p.Spec.Rules {
		out.Rules = append(out.Rules, rule(&p.Spec.Rules[i]))
	}
	return out.WithDefaults()
}

// FrozenAgent converts one FrozenAgent.
func FrozenAgent(f *v1alpha1.FrozenAgent) engine.FrozenAgent {
	out := engine.FrozenAgent{ID: f.Spec.AgentID, ServiceAccount: f.Spec.ServiceAccount, All: f.Spec.AllAgents, Reason: f.Spec.Reason}
	if f.Spec.ExpiresAt != nil {
		t := f.Spec.ExpiresAt.UTC()
		out.ExpiresAt = &t
	}
	return out
}
