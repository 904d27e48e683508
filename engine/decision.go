package engine

import "github.com/toolgate/toolgate/engine/decision"

// What an evaluation answers is package decision's; engine names it too, so
// that Evaluate's callers need engine alone (as os names io/fs's types).

type (
	// Result is the outcome of one evaluation (decision.Result).
	Result         = decision.Result
	Decision       = decision.Decision
	Code           = decision.Code
	Effect         = decision.Effect
	ApprovalRef    = decision.ApprovalRef
	ResourceRef    = decision.ResourceRef
	ShadowVerdict  = decision.ShadowVerdict
	TraceRule      = decision.TraceRule
	TraceVerdict   = decision.TraceVerdict
	TraceCondition = decision.TraceCondition
	Redaction      = decision.Redaction
	Explanation    = decision.Explanation
)

// Decisions, effects, the engine's codes and verdict outcomes (see package
// decision).
const (
	Allow = decision.Allow
	Deny  = decision.Deny
	Ask   = decision.Ask

	EffectAllow  = decision.EffectAllow
	EffectDeny   = decision.EffectDeny
	EffectWarn   = decision.EffectWarn
	EffectAudit  = decision.EffectAudit
	EffectAsk    = decision.EffectAsk
	EffectRedact = decision.EffectRedact

	CodeAgentFrozen        = decision.CodeAgentFrozen
	CodeNoPolicies         = decision.CodeNoPolicies
	CodePolicyCompileError = decision.CodePolicyCompileError
	CodeEvalTimeout        = decision.CodeEvalTimeout
	CodeAgentUnregistered  = decision.CodeAgentUnregistered
	CodeApprovalRequired   = decision.CodeApprovalRequired
	CodeImplicitDeny       = decision.CodeImplicitDeny
	CodeUnknownPhase       = decision.CodeUnknownPhase

	OutcomeMatch        = decision.OutcomeMatch
	OutcomeNoMatch      = decision.OutcomeNoMatch
	OutcomeNoOpinion    = decision.OutcomeNoOpinion
	OutcomeImplicitDeny = decision.OutcomeImplicitDeny

	MaxTraceValue = decision.MaxTraceValue
)

// RedactionMark is decision.RedactionMark.
func RedactionMark(ruleID string) string { return decision.RedactionMark(ruleID) }

// MergeRedactions is decision.MergeRedactions.
func MergeRedactions(spans []Redaction) []Redaction { return decision.MergeRedactions(spans) }

// ApplyRedactions is decision.ApplyRedactions.
func ApplyRedactions(text string, spans []Redaction) string {
	return decision.ApplyRedactions(text, spans)
}
