package engine

// Issue 28: result rules. A rule's phase says when it runs: call rules
// decide whether a tool may run, result rules judge what it returned. An
// evaluation runs the rules of one phase (EvalOptions.Phase); freezes stop
// both.

// Phase is when a rule runs.
type Phase string

const (
	// PhaseCall is the default: the rule decides the call before the tool
	// runs.
	PhaseCall Phase = "call"
	// PhaseResult rules see the call and its output (FieldOutput) and judge
	// what the tool returned: deny withholds it, redact rewrites it.
	PhaseResult Phase = "result"
)

// EffectRedact lets a result go on with every span its rule's matches,
// contains and detect conditions on output.text matched replaced with
// RedactionMark(rule id). It ranks below deny and above warn; only result
// rules may have it.
const EffectRedact Effect = "redact"

// RedactionMark is what replaces a redacted span of rule ruleID.
func RedactionMark(ruleID string) string { return "[REDACTED:" + ruleID + "]" }

// Redaction is one span of output.text to replace: byte offsets
// [Start, End) into the text the evaluation saw, and the rule whose
// condition matched it. A result's redactions are sorted by Start and do
// not overlap.
type Redaction struct {
	Start    int    `json:"start"`
	End      int    `json:"end"`
	PolicyID string `json:"policyId"`
	RuleID   string `json:"ruleId"`
}

// Explanation says, for one result rule that ran, whether its conditions
// held (Passed), the fraction that did (Score: of the rule's conditions,
// each any group counting 1 or 0), and a sentence about the condition that
// settled it: the first that failed, or for a passed rule the first that
// matched ("condition 1: output.text matches pattern `AKIA[0-9A-Z]{16}` at
// byte 1042 (20 bytes)"). A sentence never repeats what matched, only its
// position and length.
type Explanation struct {
	PolicyID string  `json:"policyId"`
	RuleID   string  `json:"ruleId"`
	Effect   Effect  `json:"effect"`
	Passed   bool    `json:"passed"`
	Score    float64 `json:"score"`
	// Condition is the 1-based index of the condition Sentence is about, 0
	// when the rule has no conditions.
	Condition int    `json:"condition,omitempty"`
	Sentence  string `json:"explanation,omitempty"`
}
