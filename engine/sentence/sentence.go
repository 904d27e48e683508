// Package sentence words the explanations of result decisions (issue 28):
// one sentence per condition, "condition 2: output is not valid JSON".
// A sentence names the condition's field, operator and the policy's own
// operand, and where a match is (its byte offset and length), never what
// the field held or what matched: explanations go to decision logs, and a
// secret must not follow them there.
package sentence

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Test is one test condition as evaluated.
type Test struct {
	Field, Operator string
	Value           json.RawMessage
	Values          []json.RawMessage
	Present, Held   bool
	// Truncated: the caller could not hold the whole output, and the test
	// was taken as held.
	Truncated bool
	// Match is where the match the sentence reports is: the first one of
	// a matches, contains or detect that held, or of a not_contains that
	// failed. Length 0: none.
	Match Span
	// Detector names what a detect condition found.
	Detector string
	// Reason says why a castToNumber test failed on a present field that
	// is no number (never the field's value).
	Reason string
}

// Span is a byte range of a field's text.
type Span struct{ Start, Length int }

// Condition is the sentence about condition index (0-based) of a rule.
func Condition(index int, phrase string) string {
	return fmt.Sprintf("condition %d: %s", index+1, phrase)
}

// NoConditions is what a rule without conditions says.
const NoConditions = "the rule has no conditions: it holds whenever its filters do"

// Any words an any group: when it held, which alternative (0-based) did
// and its phrase; otherwise that none of its n did.
func Any(held bool, n, which int, phrase string) string {
	if !held {
		return fmt.Sprintf("none of its %d alternatives holds", n)
	}
	return fmt.Sprintf("alternative %d of %d holds: %s", which+1, n, phrase)
}

// All words an all group: when it held, that all n tests did; otherwise
// the first that failed (0-based) and its phrase.
func All(held bool, n, which int, phrase string) string {
	if held {
		return fmt.Sprintf("all %d of its tests hold", n)
	}
	return fmt.Sprintf("test %d of %d fails: %s", which+1, n, phrase)
}

// Phrase words one test: "output.text matches pattern `x` at byte 4 (20
// bytes)", "output.structured.rows is not greater than 100".
func Phrase(t Test) string {
	f := t.Field
	if t.Truncated {
		return f + " was not read whole (the output was truncated), so the test is taken as holding"
	}
	if !t.Present && !t.Held {
		switch t.Operator {
		case "exists", "is_not_empty":
		default:
			return f + " is missing"
		}
	}
	if t.Reason != "" && !t.Held {
		return fmt.Sprintf("%s %s does not hold: %s", f, t.Operator, t.Reason)
	}
	v := operand(t.Value)
	at := ""
	if t.Match.Length > 0 {
		at = fmt.Sprintf(" at byte %d (%d bytes)", t.Match.Start, t.Match.Length)
	}
	switch t.Operator {
	case "eq":
		return pick(t.Held, f+" equals "+v, f+" does not equal "+v)
	case "neq":
		return pick(t.Held, f+" does not equal "+v, f+" equals "+v)
	case "in":
		return pick(t.Held, f+" is one of "+list(t), f+" is not one of "+list(t))
	case "not_in":
		return pick(t.Held, f+" is not one of "+list(t), f+" is one of "+list(t))
	case "contains":
		return pick(t.Held, f+" contains "+quoted(t.Value)+at, f+" does not contain "+quoted(t.Value))
	case "not_contains":
		return pick(t.Held, f+" does not contain "+quoted(t.Value), f+" contains "+quoted(t.Value)+at)
	case "starts_with":
		return pick(t.Held, f+" starts with "+quoted(t.Value), f+" does not start with "+quoted(t.Value))
	case "ends_with":
		return pick(t.Held, f+" ends with "+quoted(t.Value), f+" does not end with "+quoted(t.Value))
	case "matches":
		return pick(t.Held, f+" matches pattern "+quoted(t.Value)+at, f+" does not match pattern "+quoted(t.Value))
	case "gt":
		return pick(t.Held, f+" is greater than "+v, f+" is not greater than "+v)
	case "gte":
		return pick(t.Held, f+" is at least "+v, f+" is less than "+v)
	case "lt":
		return pick(t.Held, f+" is less than "+v, f+" is not less than "+v)
	case "lte":
		return pick(t.Held, f+" is at most "+v, f+" is greater than "+v)
	case "exists":
		return pick(t.Held, f+" is present", f+" is missing")
	case "not_exists":
		return pick(t.Held, f+" is missing", f+" is present")
	case "is_empty":
		return pick(t.Held, f+" is empty", f+" is not empty")
	case "is_not_empty":
		return pick(t.Held, f+" is not empty", f+" is empty")
	case "is_valid_json":
		return pick(t.Held, f+" is valid JSON", f+" is not valid JSON")
	case "detect":
		if t.Held {
			return f + " contains " + article(t.Detector) + " " + t.Detector + at
		}
		return f + " contains no " + strings.Join(detectors(t), ", ")
	}
	return pick(t.Held, f+" "+t.Operator+" "+v+" holds", f+" "+t.Operator+" "+v+" does not hold")
}

func pick(held bool, yes, no string) string {
	if held {
		return yes
	}
	return no
}

// maxOperand bounds how much of a policy's operand a sentence repeats.
const maxOperand = 64

// operand is a scalar operand as written (JSON), cut to maxOperand bytes.
func operand(raw json.RawMessage) string { return cut(strings.TrimSpace(string(raw))) }

// quoted is a string operand between backquotes: `AKIA[0-9A-Z]{16}`.
func quoted(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return operand(raw)
	}
	return "`" + cut(s) + "`"
}

func cut(s string) string {
	if len(s) <= maxOperand {
		return s
	}
	n := maxOperand
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "..."
}

// list is in's operand: its values when they are few, else their count.
func list(t Test) string {
	raws := t.Values
	if len(t.Value) > 0 {
		raws = []json.RawMessage{t.Value}
	}
	if len(raws) > 4 {
		return fmt.Sprintf("the %d listed values", len(raws))
	}
	parts := make([]string, len(raws))
	for i, r := range raws {
		parts[i] = operand(r)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// detectors are the names a detect condition lists.
func detectors(t Test) []string {
	raws := t.Values
	if len(t.Value) > 0 {
		raws = []json.RawMessage{t.Value}
	}
	out := make([]string, 0, len(raws))
	for _, r := range raws {
		var s string
		if json.Unmarshal(r, &s) == nil {
			out = append(out, s)
		}
	}
	return out
}

func article(name string) string {
	if name != "" && strings.ContainsRune("aeiou", rune(name[0])) {
		return "an"
	}
	return "a"
}
