package engine

import "fmt"

// What evaluation says and compares, exported for ports of the engine to
// other evaluators (the Rego exporter), so that a port states exactly what
// the engine states rather than a copy of it.

// FoldKey is the canonical form of an agent id: FoldKey(a) == FoldKey(b)
// exactly when a freeze of a applies to b (Unicode simple folding, as
// strings.EqualFold).
func FoldKey(s string) string { return foldKey(s) }

// RuleReason is the reason a result decided by rule r of policy policyID
// gives: its description, or a sentence naming it; an allow gives none.
func RuleReason(policyID string, r *Rule) string { return ruleReason(policyID, r) }

// DefaultDenyReason is the reason of a deny by the first policy's
// defaultEffect.
func DefaultDenyReason(policyID string) string {
	return fmt.Sprintf("no rule matched and policy %q denies by default", policyID)
}

// CompileError is the reason of the POLICY_COMPILE_ERROR deny evaluation
// gives on reaching p, or "" when p compiles.
func CompileError(p Policy) string {
	return compileErrorOf(p.ID, CheckPolicy(p))
}

func compileErrorOf(id string, diags []Diagnostic) string {
	if len(diags) == 0 {
		return ""
	}
	return fmt.Sprintf("policy %q failed to compile: %s", id, diags[0].String())
}

// EffectRank orders effects as a tiered policy ranks them: deny (3) > warn
// > audit > allow (0).
func EffectRank(e Effect) int { return effectRank(e) }

// SelectToolPattern tells whether a select.tool value is a /regex/, and
// returns the pattern.
func SelectToolPattern(tool string) (string, bool) { return regexOf(tool) }

// ServerOf derives an MCP tool's server from its name, as the gateway
// filters do when a request names no server.
func ServerOf(tool string) (string, bool) { return serverOf(tool) }
