// Package decision is what an evaluation answers: the Result (decision,
// effect, code, the rule that decided, warnings, the trace, and for a
// result rule the redactions and explanations) and its JSON. It is the
// vocabulary the engine, the sidecar and every client share; engine names
// each of its exported names too (as os names io/fs's), so that callers
// of Evaluate need engine alone.
package decision

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/toolgate/toolgate/engine/internal/jsonvalue"
)

// Decision is allow, deny or ask. Ask (an ask rule decided) is not an
// allow: the call waits for a person's approval (package approval), and
// whoever cannot wait treats it as a deny.
type Decision string

const (
	Allow Decision = "allow"
	Deny  Decision = "deny"
	Ask   Decision = "ask"
)

// Code explains a deny that did not come from a rule.
type Code string

const (
	CodeAgentFrozen        Code = "AGENT_FROZEN"
	CodeNoPolicies         Code = "NO_POLICIES"
	CodePolicyCompileError Code = "POLICY_COMPILE_ERROR"
	CodeEvalTimeout        Code = "EVAL_TIMEOUT"
	// CodeAgentUnregistered denies every call of a sidecar whose
	// ServiceAccount has no Agent in a namespace whose agents are
	// registered (engine.Identity).
	CodeAgentUnregistered Code = "AGENT_UNREGISTERED"
	// CodeApprovalRequired is the code of every ask decision.
	CodeApprovalRequired Code = "APPROVAL_REQUIRED"
)

// Result is the outcome of one evaluation. Empty matched ids are written as
// JSON null.
type Result struct {
	Decision Decision `json:"decision"`
	// Effect is the deciding verdict's effect: deny with every deny, and
	// allow, warn or audit when the call is allowed.
	Effect               Effect `json:"effect"`
	MatchedPolicyID      string `json:"matchedPolicyId"`
	MatchedPolicyVersion int64  `json:"matchedPolicyVersion"`
	MatchedRuleID        string `json:"matchedRuleId"`
	// MatchedPolicyKind is the level that decided, Policy or ClusterPolicy,
	// in a bundle that has ClusterPolicies; empty otherwise (one level).
	MatchedPolicyKind string `json:"matchedPolicyKind,omitempty"`
	// MatchedResource is the resource whose evaluation decided, when a
	// tiered policy decided for one resource of a multi-target call.
	MatchedResource ResourceRef `json:"matchedResource"`
	Code            Code        `json:"code,omitempty"`
	Reason          string      `json:"reason,omitempty"`
	LatencyMs       float64     `json:"latencyMs"`
	// Warnings are the reasons of every warn verdict reached, in scan
	// order, whatever decided.
	Warnings []string `json:"warnings,omitempty"`
	// ExceptionApplied names the PolicyException that changed this
	// decision: without it the decision, effect or deciding rule would
	// differ.
	ExceptionApplied string `json:"exceptionApplied,omitempty"`
	// Shadow is what each Audit policy would have decided on its own; it
	// never changes the decision.
	Shadow []ShadowVerdict `json:"shadow,omitempty"`
	Trace  []TraceRule     `json:"trace,omitempty"`
	// Verdicts explain, with the trace, each verdict a tiered policy
	// reached: per evaluation (the call, each resource) the tier that
	// decided, or why none did.
	Verdicts []TraceVerdict `json:"verdicts,omitempty"`
	// ApprovalTimeout is how long an ask decision's call waits for a
	// person (the asking rule's approval.timeout); the sidecar sets the
	// ApprovalRequest's expiry from it.
	ApprovalTimeout time.Duration `json:"-"`
	// Approval names the ApprovalRequest an ask decision waits on; the
	// sidecar sets it, the engine never does.
	Approval *ApprovalRef `json:"approval,omitempty"`
	// Redactions are the spans of output.text a redact decision replaces
	// (result evaluations only).
	Redactions []Redaction `json:"redactions,omitempty"`
	// Output is the output as it is delivered after a redact decision:
	// the request's output with its text redacted. Nil otherwise.
	Output map[string]any `json:"output,omitempty"`
	// Explanations are, in a result evaluation, one per result rule that
	// ran.
	Explanations []Explanation `json:"explanations,omitempty"`
	// TraceTruncated is set when engine.EvalOptions.MaxTrace cut the trace short:
	// rules after its last entry were evaluated but not traced.
	TraceTruncated bool `json:"traceTruncated,omitempty"`
}

// ApprovalRef names the ApprovalRequest an ask decision waits on.
type ApprovalRef struct {
	Name      string    `json:"name"`
	Namespace string    `json:"namespace"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// TraceRule explains one rule the evaluation reached.
type TraceRule struct {
	PolicyID  string `json:"policyId"`
	RuleIndex int    `json:"ruleIndex"`
	RuleID    string `json:"ruleId,omitempty"`
	Effect    string `json:"effect,omitempty"`
	Priority  int32  `json:"priority,omitempty"`
	// Resource is the resource under evaluation, in a tiered policy's
	// per-resource evaluation.
	Resource *ResourceRef `json:"resource,omitempty"`
	Matched  bool         `json:"matched"`
	// Exception names the PolicyException that exempted this call from the
	// rule: its filters held, and it counts as not matching.
	Exception string `json:"exception,omitempty"`
	// Failed names the first filter that did not hold: subjects, targets,
	// select, when or conditions. Empty when the rule matched.
	Failed       string           `json:"failed,omitempty"`
	CompileError string           `json:"compileError,omitempty"`
	Conditions   []TraceCondition `json:"conditions,omitempty"`
}

// TraceVerdict is one verdict of a tiered policy: for the call (Resource
// nil) or one resource, the tier that decided and its deciding rule, or
// Outcome no-match, no-opinion (no rule bound to the resource) or
// implicit-deny (rules bound to it, none matched).
type TraceVerdict struct {
	PolicyID string       `json:"policyId"`
	Resource *ResourceRef `json:"resource,omitempty"`
	Outcome  string       `json:"outcome"`
	Tier     *int32       `json:"tier,omitempty"`
	RuleID   string       `json:"ruleId,omitempty"`
	Effect   Effect       `json:"effect,omitempty"`
}

// Verdict outcomes in a trace.
const (
	OutcomeMatch        = "match"
	OutcomeNoMatch      = "no-match"
	OutcomeNoOpinion    = "no-opinion"
	OutcomeImplicitDeny = "implicit-deny"
)

// TraceCondition shows one condition: what the field resolved to and whether
// it held.
type TraceCondition struct {
	Index    int               `json:"index"`
	Field    string            `json:"field,omitempty"`
	Operator string            `json:"operator,omitempty"`
	Value    json.RawMessage   `json:"value,omitempty"`
	Values   []json.RawMessage `json:"values,omitempty"`
	Present  bool              `json:"present"`
	Resolved string            `json:"resolved,omitempty"` // stringified, truncated
	Held     bool              `json:"held"`
	// CastToNumber is the condition's; Reason then says why the field is
	// not a number when it is not one (the condition is false).
	CastToNumber bool   `json:"castToNumber,omitempty"`
	Reason       string `json:"reason,omitempty"`
	// Group is any or all for a group, whose Members are traced in turn.
	Group   string           `json:"group,omitempty"`
	Members []TraceCondition `json:"members,omitempty"`
}

// MaxTraceValue bounds how much of a resolved value a trace repeats.
const MaxTraceValue = 256

// MarshalJSON writes the documented shape, with null for absent matches.
func (r Result) MarshalJSON() ([]byte, error) {
	return r.AppendJSON(make([]byte, 0, 256))
}

// AppendJSON appends r as JSON to dst without reflection on the common path,
// so a server can encode into a pooled buffer.
func (r Result) AppendJSON(dst []byte) ([]byte, error) {
	dst = append(dst, `{"decision":`...)
	dst = jsonvalue.AppendString(dst, string(r.Decision))
	dst = append(dst, `,"effect":`...)
	dst = jsonvalue.AppendString(dst, string(r.StatedEffect()))
	dst = append(dst, `,"matchedPolicyId":`...)
	dst = jsonvalue.AppendNullableString(dst, r.MatchedPolicyID)
	dst = append(dst, `,"matchedPolicyVersion":`...)
	if r.MatchedPolicyID == "" {
		dst = append(dst, "null"...)
	} else {
		dst = strconv.AppendInt(dst, r.MatchedPolicyVersion, 10)
	}
	dst = append(dst, `,"matchedRuleId":`...)
	dst = jsonvalue.AppendNullableString(dst, r.MatchedRuleID)
	if r.MatchedPolicyKind != "" {
		dst = append(dst, `,"matchedPolicyKind":`...)
		dst = jsonvalue.AppendString(dst, r.MatchedPolicyKind)
	}
	if r.MatchedResource != (ResourceRef{}) {
		dst = append(dst, `,"matchedResource":{"type":`...)
		dst = jsonvalue.AppendString(dst, r.MatchedResource.Type)
		dst = append(dst, `,"name":`...)
		dst = jsonvalue.AppendString(dst, r.MatchedResource.Name)
		dst = append(dst, '}')
	}
	if code := r.StatedCode(); code != "" {
		dst = append(dst, `,"code":`...)
		dst = jsonvalue.AppendString(dst, string(code))
	}
	if r.Reason != "" {
		dst = append(dst, `,"reason":`...)
		dst = jsonvalue.AppendString(dst, r.Reason)
	}
	dst = append(dst, `,"latencyMs":`...)
	dst = strconv.AppendFloat(dst, r.LatencyMs, 'f', -1, 64)
	if r.Warnings != nil {
		dst = append(dst, `,"warnings":[`...)
		for i, w := range r.Warnings {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonvalue.AppendString(dst, w)
		}
		dst = append(dst, ']')
	}
	if a := r.Approval; a != nil {
		dst = append(dst, `,"approval":{"name":`...)
		dst = jsonvalue.AppendString(dst, a.Name)
		dst = append(dst, `,"namespace":`...)
		dst = jsonvalue.AppendString(dst, a.Namespace)
		dst = append(dst, `,"expiresAt":`...)
		dst = jsonvalue.AppendString(dst, a.ExpiresAt.UTC().Format(time.RFC3339))
		dst = append(dst, '}')
	}
	if r.ExceptionApplied != "" {
		dst = append(dst, `,"exceptionApplied":`...)
		dst = jsonvalue.AppendString(dst, r.ExceptionApplied)
	}
	var err error
	if r.Shadow != nil {
		if dst, err = appendMarshaled(dst, `,"shadow":`, r.Shadow); err != nil {
			return nil, err
		}
	}
	if r.Trace != nil {
		if dst, err = appendMarshaled(dst, `,"trace":`, r.Trace); err != nil {
			return nil, err
		}
	}
	if r.Verdicts != nil {
		if dst, err = appendMarshaled(dst, `,"verdicts":`, r.Verdicts); err != nil {
			return nil, err
		}
	}
	if r.TraceTruncated {
		dst = append(dst, `,"traceTruncated":true`...)
	}
	return r.appendResultPhase(dst)
}

// appendResultPhase closes r's JSON with what a result evaluation adds:
// the redactions, the output as delivered after them, and the
// explanations (reflection is fine: a call's decision has none of them).
func (r *Result) appendResultPhase(dst []byte) ([]byte, error) {
	var err error
	if r.Redactions != nil {
		if dst, err = appendMarshaled(dst, `,"redactions":`, r.Redactions); err != nil {
			return nil, err
		}
	}
	if r.Output != nil {
		if dst, err = appendMarshaled(dst, `,"output":`, r.Output); err != nil {
			return nil, err
		}
	}
	if r.Explanations != nil {
		if dst, err = appendMarshaled(dst, `,"explanations":`, r.Explanations); err != nil {
			return nil, err
		}
	}
	return append(dst, '}'), nil
}

// appendMarshaled appends key and v as encoding/json writes it: the parts
// of an answer that are rare or nested, and not worth writing by hand.
func appendMarshaled(dst []byte, key string, v any) ([]byte, error) {
	t, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(append(dst, key...), t...), nil
}

// StatedEffect is the effect r states: Effect, or the decision's when it
// was left unset (a Result built by hand, such as a caller's own deny). A
// written result always states one; metrics and logs use the same.
func (r *Result) StatedEffect() Effect {
	if r.Effect != "" {
		return r.Effect
	}
	if r.Decision == Allow {
		return EffectAllow
	}
	return EffectDeny
}

// StatedCode is the code an answer states: the engine's own code (a deny
// no rule made, such as AGENT_FROZEN), else, on a deny by a rule, the
// rule's id, so that a caller reads why from one field whatever denied.
// Code itself stays empty on a rule's deny: metrics label by it, and rule
// ids are not a bounded set of labels.
func (r *Result) StatedCode() Code {
	if r.Code == "" && r.Decision == Deny && r.MatchedRuleID != "" {
		return Code(r.MatchedRuleID)
	}
	return r.Code
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Result) UnmarshalJSON(b []byte) error {
	type plain Result
	var p struct {
		plain
		MatchedPolicyID      *string      `json:"matchedPolicyId"`
		MatchedPolicyVersion *int64       `json:"matchedPolicyVersion"`
		MatchedRuleID        *string      `json:"matchedRuleId"`
		MatchedResource      *ResourceRef `json:"matchedResource"`
	}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*r = Result(p.plain)
	if p.MatchedPolicyID != nil {
		r.MatchedPolicyID = *p.MatchedPolicyID
	}
	if p.MatchedPolicyVersion != nil {
		r.MatchedPolicyVersion = *p.MatchedPolicyVersion
	}
	if p.MatchedRuleID != nil {
		r.MatchedRuleID = *p.MatchedRuleID
	}
	if p.MatchedResource != nil {
		r.MatchedResource = *p.MatchedResource
	}
	return nil
}

// Effect is what a rule decides. Warn and audit allow the call: warn adds
// the rule's reason to the result's warnings, audit only marks the result.
type Effect string

const (
	EffectAllow Effect = "allow"
	EffectDeny  Effect = "deny"
	EffectWarn  Effect = "warn"
	EffectAudit Effect = "audit"
	// EffectAsk holds the call for a person's approval: it ranks below
	// deny and above warn.
	EffectAsk Effect = "ask"
)

// CodeImplicitDeny is the code of a tiered policy's deny for a resource
// that has rules bound to it, none of which matched.
const CodeImplicitDeny Code = "IMPLICIT_DENY"

// CodeUnknownPhase denies an evaluation asked for a phase that is neither
// call nor result (engine.EvalOptions.Phase): a caller's mistake never allows.
const CodeUnknownPhase Code = "UNKNOWN_PHASE"

// ResourceRef names one resource a call touches.
type ResourceRef struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

// ShadowVerdict is what one Audit policy would have decided on its own:
// recorded beside the decision, never changing it.
type ShadowVerdict struct {
	// Kind is engine.KindClusterPolicy for a ClusterPolicy, omitted for a Policy.
	Kind     string   `json:"kind,omitempty"`
	Policy   string   `json:"policy"`
	Decision Decision `json:"decision"`
	// Rule is the rule that decided, empty when the policy's default did.
	Rule string `json:"rule,omitempty"`
}
