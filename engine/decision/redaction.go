package decision

import (
	"cmp"
	"slices"
	"strings"
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

// MergeRedactions sorts spans by Start (ties by their order in spans, the
// rules' scan order) and merges those that overlap into the earlier one,
// which keeps its rule; adjacent spans stay apart. Empty spans are dropped.
func MergeRedactions(spans []Redaction) []Redaction {
	spans = slices.DeleteFunc(slices.Clone(spans), func(r Redaction) bool { return r.End <= r.Start })
	slices.SortStableFunc(spans, func(a, b Redaction) int { return cmp.Compare(a.Start, b.Start) })
	var out []Redaction
	for _, r := range spans {
		if n := len(out); n > 0 && r.Start < out[n-1].End {
			out[n-1].End = max(out[n-1].End, r.End)
			continue
		}
		out = append(out, r)
	}
	return out
}

// ApplyRedactions replaces each span of text with RedactionMark(its
// rule): spans sorted by Start, not overlapping, within text (what
// Result.Redactions holds). A span that overlaps the previous one or
// leaves text is dropped rather than trusted. The MCP proxy applies a
// result's redactions with it.
func ApplyRedactions(text string, spans []Redaction) string {
	var b strings.Builder
	last := 0
	for _, r := range spans {
		if r.Start < last || r.End <= r.Start || r.End > len(text) {
			continue
		}
		b.WriteString(text[last:r.Start])
		b.WriteString(RedactionMark(r.RuleID))
		last = r.End
	}
	if last == 0 && b.Len() == 0 {
		return text
	}
	b.WriteString(text[last:])
	return b.String()
}
