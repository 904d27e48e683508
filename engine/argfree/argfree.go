// Package argfree finds what a bundle denies whatever a call's arguments:
// the MCP proxy hides such tools from tools/list. It reads bundles as
// written, through the engine's exported types, and decides nothing
// itself: the engine compiles and evaluates what it returns.
package argfree

import (
	"slices"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/engine/request"
)

// Denials returns the part of b that denies a call whatever its
// arguments: for each ordered policy, the deny rules whose every filter and
// condition reads only the request fields named in static (for an MCP
// tools/list: tool_name, server, action, framework and, when the caller
// binds one, agent_id). A call the result denies by a rule (Decision deny,
// no Code, a MatchedRuleID) is denied by b for every value of every other
// field: a matching deny returns at once, and nothing before it in b can
// turn it into an allow (earlier allows are only remembered, earlier denies
// and compile errors deny too). The converse does not hold: tiered
// policies, default effects and rules reading anything else are left out,
// so a call the result allows may still be denied at call time.
//
// The result has no frozen agents and may have no policies (then nothing is
// denied by a rule: callers must not read its NO_POLICIES deny as one).
// Pure: b is not modified.
func Denials(b engine.Bundle, static []string) engine.Bundle {
	known := make(map[string]bool, len(static))
	for _, f := range static {
		known[f] = true
	}
	out := engine.Bundle{SchemaVersion: b.SchemaVersion}
	for _, p := range b.Policies {
		// An Audit policy never denies; a deny of either level denies
		// whatever the other decides.
		if p.Tiered() || p.Audit() {
			continue
		}
		var rules []engine.Rule
		for _, r := range p.Rules {
			// A result rule denies what a tool returned, never the call.
			if r.Phase == "" && engine.Effect(r.Effect) == engine.EffectDeny && ruleReadsOnly(&r, known) && !exempted(b.Exceptions, &p, r.ID) {
				rules = append(rules, r)
			}
		}
		if len(rules) == 0 {
			continue
		}
		out.Policies = append(out.Policies, engine.Policy{ID: p.ID, Version: p.Version, Priority: p.Priority,
			DefaultEffect: string(engine.Allow), Rules: rules})
	}
	return out
}

// exempted tells whether an exception names rule id of p: for the agents
// it exempts (and until it expires) the rule does not deny, so it is not a
// denial whatever the arguments.
func exempted(exceptions []engine.Exception, p *engine.Policy, id string) bool {
	for i := range exceptions {
		x := &exceptions[i]
		if x.Policy == p.ID && (x.PolicyKind == engine.KindClusterPolicy) == p.Cluster() && slices.Contains(x.RuleIDs, id) {
			return true
		}
	}
	return false
}

// ruleReadsOnly tells whether every filter of r reads only known fields.
// Time windows and usage limits are never argument-free: they change.
func ruleReadsOnly(r *engine.Rule, known map[string]bool) bool {
	need := func(field string, used bool) bool { return !used || known[field] }
	if s := r.Subjects; s != nil && (!need(engine.FieldAgentID, s.Agents != nil) || !need(engine.FieldRoles, s.Roles != nil)) {
		return false
	}
	if t := r.Targets; t != nil && (!need(engine.FieldServer, t.Servers != nil) || !need(engine.FieldToolName, t.Tools != nil) ||
		!need(engine.FieldResources, t.Resources != nil)) {
		return false
	}
	if s := r.Select; s != nil && (!need(engine.FieldAction, s.Action != nil) || !need(engine.FieldSideEffect, s.SideEffect != nil) ||
		!need(engine.FieldToolName, s.Tool != "") || !need(engine.FieldResources, s.ResourceType != "") || !need(engine.FieldContext, s.Context != nil)) {
		return false
	}
	if w := r.When; w != nil && (w.Schedule != nil || w.RateLimit != nil || w.TokenBudget != nil ||
		!need(engine.FieldEnvironment, w.Environments != nil) || !need(engine.FieldSensitivity, w.Sensitivity != nil) ||
		!need(engine.FieldActorConfidence, w.ActorConfidence != nil)) {
		return false
	}
	return conditionsReadOnly(r.Conditions, known)
}

func conditionsReadOnly(cs []engine.Condition, known map[string]bool) bool {
	for i := range cs {
		c := &cs[i]
		if c.Any != nil || c.All != nil {
			if !conditionsReadOnly(c.Any, known) || !conditionsReadOnly(c.All, known) {
				return false
			}
			continue
		}
		p, err := request.ParsePath(c.Field)
		if err != nil || len(p) == 0 || !known[p[0].Key] {
			return false
		}
	}
	return true
}
