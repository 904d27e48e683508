package engine

import (
	"encoding/json"
	"strconv"
)

// Decision is allow or deny; nothing else is ever returned.
type Decision string

const (
	Allow Decision = "allow"
	Deny  Decision = "deny"
)

// Code explains a deny that did not come from a rule.
type Code string

const (
	CodeAgentFrozen        Code = "AGENT_FROZEN"
	CodeNoPolicies         Code = "NO_POLICIES"
	CodePolicyCompileError Code = "POLICY_COMPILE_ERROR"
	CodeEvalTimeout        Code = "EVAL_TIMEOUT"
)

// Result is the outcome of one evaluation. Empty matched ids are written as
// JSON null.
type Result struct {
	Decision             Decision    `json:"decision"`
	MatchedPolicyID      string      `json:"matchedPolicyId"`
	MatchedPolicyVersion int64       `json:"matchedPolicyVersion"`
	MatchedRuleID        string      `json:"matchedRuleId"`
	Code                 Code        `json:"code,omitempty"`
	Reason               string      `json:"reason,omitempty"`
	LatencyMs            float64     `json:"latencyMs"`
	Trace                []TraceRule `json:"trace,omitempty"`
	// TraceTruncated is set when EvalOptions.MaxTrace cut the trace short:
	// rules after its last entry were evaluated but not traced.
	TraceTruncated bool `json:"traceTruncated,omitempty"`
}

// TraceRule explains one rule the evaluation reached.
type TraceRule struct {
	PolicyID     string           `json:"policyId"`
	RuleIndex    int              `json:"ruleIndex"`
	RuleID       string           `json:"ruleId,omitempty"`
	Effect       string           `json:"effect,omitempty"`
	Matched      bool             `json:"matched"`
	CompileError string           `json:"compileError,omitempty"`
	Conditions   []TraceCondition `json:"conditions,omitempty"`
}

// TraceCondition shows one condition: what the field resolved to and whether
// it held.
type TraceCondition struct {
	Index    int               `json:"index"`
	Field    string            `json:"field"`
	Operator string            `json:"operator"`
	Value    json.RawMessage   `json:"value,omitempty"`
	Values   []json.RawMessage `json:"values,omitempty"`
	Present  bool              `json:"present"`
	Resolved string            `json:"resolved,omitempty"` // stringified, truncated
	Held     bool              `json:"held"`
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
	dst = AppendJSONString(dst, string(r.Decision))
	dst = append(dst, `,"matchedPolicyId":`...)
	dst = AppendNullableJSONString(dst, r.MatchedPolicyID)
	dst = append(dst, `,"matchedPolicyVersion":`...)
	if r.MatchedPolicyID == "" {
		dst = append(dst, "null"...)
	} else {
		dst = strconv.AppendInt(dst, r.MatchedPolicyVersion, 10)
	}
	dst = append(dst, `,"matchedRuleId":`...)
	dst = AppendNullableJSONString(dst, r.MatchedRuleID)
	if r.Code != "" {
		dst = append(dst, `,"code":`...)
		dst = AppendJSONString(dst, string(r.Code))
	}
	if r.Reason != "" {
		dst = append(dst, `,"reason":`...)
		dst = AppendJSONString(dst, r.Reason)
	}
	dst = append(dst, `,"latencyMs":`...)
	dst = strconv.AppendFloat(dst, r.LatencyMs, 'f', -1, 64)
	if r.Trace != nil {
		t, err := json.Marshal(r.Trace)
		if err != nil {
			return nil, err
		}
		dst = append(dst, `,"trace":`...)
		dst = append(dst, t...)
	}
	if r.TraceTruncated {
		dst = append(dst, `,"traceTruncated":true`...)
	}
	return append(dst, '}'), nil
}

// UnmarshalJSON reads what MarshalJSON writes.
func (r *Result) UnmarshalJSON(b []byte) error {
	type plain Result
	var p struct {
		plain
		MatchedPolicyID      *string `json:"matchedPolicyId"`
		MatchedPolicyVersion *int64  `json:"matchedPolicyVersion"`
		MatchedRuleID        *string `json:"matchedRuleId"`
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
	return nil
}

// AppendNullableJSONString writes null for "", else AppendJSONString.
func AppendNullableJSONString(dst []byte, s string) []byte {
	if s == "" {
		return append(dst, "null"...)
	}
	return AppendJSONString(dst, s)
}

// AppendJSONString quotes s as encoding/json would, without allocating.
func AppendJSONString(dst []byte, s string) []byte { return appendQuoted(dst, s, true) }
