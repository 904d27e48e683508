package engine

// This file is a deliberately naive evaluator written from the contract in
// issue 2, section 3, sharing no code with the engine: a linear scan with no
// index and no caching, strings.EqualFold for frozen agents, its own path
// walk, stringification and validation, and go-re2 for every pattern. The
// differential tests hold the engine to it.

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wasilibs/go-re2"
)

// refOutcome is what the contract fixes about a decision.
type refOutcome struct {
	Decision Decision
	Code     Code
	PolicyID string
	Version  int64
	RuleID   string
}

// refEvaluate is the outcome under issue 9's model, which for a bundle
// without its fields must be refEvaluate000's.
func refEvaluate(b Bundle, req map[string]any, now time.Time) refOutcome {
	return refGateway(b, req, now, nil).refOutcome
}

// refEvaluate000 is seed 000's model exactly as it was before issue 9, kept
// so the differential can show the new model changed nothing for bundles
// that do not use it. The reason is what the engine returned then.
func refEvaluate000(b Bundle, req map[string]any, now time.Time) (refOutcome, string) {
	// 1. Frozen agents, before anything else.
	if agent, ok := req["agent_id"].(string); ok {
		for _, f := range b.FrozenAgents {
			if strings.EqualFold(f.ID, agent) && (f.ExpiresAt == nil || now.Before(*f.ExpiresAt)) {
				return refOutcome{Decision: Deny, Code: CodeAgentFrozen}, ""
			}
		}
	}
	// 2. No policies.
	if len(b.Policies) == 0 {
		return refOutcome{Decision: Deny, Code: CodeNoPolicies}, ""
	}
	// 3-4. Priority descending, then name ascending; first deny, last allow.
	policies := slices.Clone(b.Policies)
	sort.SliceStable(policies, func(i, j int) bool {
		if policies[i].Priority != policies[j].Priority {
			return policies[i].Priority > policies[j].Priority
		}
		return policies[i].ID < policies[j].ID
	})
	var lastAllow *refOutcome
	lastReason := ""
	for _, p := range policies {
		if len(refPolicyProblems(p)) > 0 {
			return refOutcome{Decision: Deny, Code: CodePolicyCompileError, PolicyID: p.ID}, ""
		}
		version := p.Version
		if version == 0 {
			version = 1
		}
		for _, r := range p.Rules {
			if !refRuleMatches(r, req) {
				continue
			}
			out := refOutcome{Decision: Allow, PolicyID: p.ID, Version: version, RuleID: r.ID}
			if r.Effect == "deny" {
				out.Decision = Deny
				if r.Description != "" {
					return out, r.Description
				}
				return out, fmt.Sprintf("denied by rule %q of policy %q", r.ID, p.ID)
			}
			lastAllow, lastReason = &out, r.Description
		}
	}
	if lastAllow != nil {
		return *lastAllow, lastReason
	}
	// 5. The first policy's defaultEffect, unset meaning allow.
	if policies[0].DefaultEffect == "deny" {
		return refOutcome{Decision: Deny}, fmt.Sprintf("no rule matched and policy %q denies by default", policies[0].ID)
	}
	return refOutcome{Decision: Allow}, ""
}

func refRuleMatches(r Rule, req map[string]any) bool {
	for _, c := range r.Conditions {
		if !refHolds(c, req) {
			return false
		}
	}
	return true
}

func refHolds(c Condition, req map[string]any) bool {
	v, present := refResolve(req, c.Field)
	if c.CastToNumber {
		return present && refCastHolds(c, v)
	}
	switch c.Operator {
	case "exists":
		return present
	case "not_exists":
		return !present
	case "is_empty":
		return !present || refIsEmpty(v)
	case "is_not_empty":
		return present && !refIsEmpty(v)
	}
	if !present {
		return c.Operator == "neq" || c.Operator == "not_in" || c.Operator == "not_contains"
	}
	want := refDecode(c.Value)
	switch c.Operator {
	case "eq":
		return refEqual(want, v)
	case "neq":
		return !refEqual(want, v)
	case "in", "not_in":
		list := c.Values
		if len(c.Value) > 0 {
			list = []json.RawMessage{c.Value}
		}
		found := false
		for _, x := range list {
			if refStringify(refDecode(x)) == refStringify(v) {
				found = true
			}
		}
		return found == (c.Operator == "in")
	case "contains":
		return strings.Contains(refStringify(v), want.(string))
	case "not_contains":
		return !strings.Contains(refStringify(v), want.(string))
	case "starts_with":
		return strings.HasPrefix(refStringify(v), want.(string))
	case "ends_with":
		return strings.HasSuffix(refStringify(v), want.(string))
	case "matches":
		return re2.MustCompile(want.(string)).MatchString(refStringify(v))
	case "gt", "gte", "lt", "lte":
		x, ok := refNumber(v)
		if !ok {
			return false
		}
		y := want.(float64)
		switch c.Operator {
		case "gt":
			return x > y
		case "gte":
			return x >= y
		case "lt":
			return x < y
		}
		return x <= y
	case "is_valid_json":
		s, ok := v.(string)
		return ok && json.Unmarshal([]byte(s), new(json.RawMessage)) == nil
	case "detect":
		_, found := refScanner(c).First(refStringify(v))
		return found
	}
	panic("reference: unknown operator " + c.Operator)
}

// refCastHolds is a castToNumber condition on a present field: false
// unless the field reads as a number, whatever the operator.
func refCastHolds(c Condition, v any) bool {
	x, ok := refCastValue(v)
	if !ok {
		return false
	}
	want := func(raw json.RawMessage) float64 {
		y, ok := refCastValue(refDecode(raw))
		if !ok {
			panic("reference: evaluating a cast value that is no number")
		}
		return y
	}
	switch c.Operator {
	case "eq":
		return x == want(c.Value)
	case "neq":
		return x != want(c.Value)
	case "gt":
		return x > want(c.Value)
	case "gte":
		return x >= want(c.Value)
	case "lt":
		return x < want(c.Value)
	case "lte":
		return x <= want(c.Value)
	case "in", "not_in":
		list := c.Values
		if len(c.Value) > 0 {
			list = []json.RawMessage{c.Value}
		}
		found := false
		for _, raw := range list {
			found = found || x == want(raw)
		}
		return found == (c.Operator == "in")
	}
	panic("reference: castToNumber on " + c.Operator)
}

// refCastValue: a number, or a string refCast reads.
func refCastValue(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case string:
		return refCast(x)
	}
	return 0, false
}

// refCast reads a string as the issue says: ASCII whitespace trimmed, one
// '+' before the digits allowed, then a JSON number that fits a float64.
func refCast(s string) (float64, bool) {
	s = strings.Trim(s, " \t\n\v\f\r")
	if rest, ok := strings.CutPrefix(s, "+"); ok {
		if rest == "" || rest[0] < '0' || rest[0] > '9' {
			return 0, false
		}
		s = rest
	}
	var n any
	if err := json.Unmarshal([]byte(s), &n); err != nil {
		return 0, false
	}
	f, ok := n.(float64)
	return f, ok
}

func refDecode(raw json.RawMessage) any {
	var v any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &v); err != nil {
			panic("reference: evaluating an invalid value")
		}
	}
	return v
}

// refResolve walks a dot-path: object keys, and decimal indexes into arrays.
func refResolve(root map[string]any, path string) (any, bool) {
	var cur any = root
	for _, seg := range strings.Split(path, ".") {
		switch node := cur.(type) {
		case map[string]any:
			v, ok := node[seg]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || strconv.Itoa(i) != seg || i >= len(node) {
				return nil, false
			}
			cur = node[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

func refIsEmpty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case []any:
		return len(x) == 0
	case map[string]any:
		return len(x) == 0
	}
	return false
}

func refEqual(want, got any) bool {
	switch w := want.(type) {
	case string:
		g, ok := got.(string)
		return ok && g == w
	case float64:
		g, ok := got.(float64)
		return ok && g == w
	case bool:
		g, ok := got.(bool)
		return ok && g == w
	}
	return false
}

// refNumber: a number, or a string that is exactly a JSON number.
func refNumber(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case string:
		if x != strings.TrimSpace(x) {
			return 0, false
		}
		var n any
		if err := json.Unmarshal([]byte(x), &n); err != nil {
			return 0, false
		}
		f, ok := n.(float64)
		return f, ok
	}
	return 0, false
}

// refStringify: strings as-is, everything else as compact JSON with minimal
// escaping (only quote, backslash and control characters, as JSON.stringify
// and RFC 8785 do), numbers without a trailing .0.
func refStringify(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	var b strings.Builder
	refWriteJSON(&b, v)
	return b.String()
}

func refWriteJSON(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(x))
	case float64:
		b.WriteString(refFormatNumber(x))
	case string:
		b.WriteByte('"')
		for _, r := range x {
			switch {
			case r == '"' || r == '\\':
				b.WriteByte('\\')
				b.WriteRune(r)
			case r == '\n':
				b.WriteString(`\n`)
			case r == '\r':
				b.WriteString(`\r`)
			case r == '\t':
				b.WriteString(`\t`)
			case r == '\b':
				b.WriteString(`\b`)
			case r == '\f':
				b.WriteString(`\f`)
			case r < 0x20:
				b.WriteString(`\u00`)
				b.WriteString(strconv.FormatInt(int64(r)>>4, 16))
				b.WriteString(strconv.FormatInt(int64(r)&15, 16))
			default:
				b.WriteRune(r)
			}
		}
		b.WriteByte('"')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			refWriteJSON(b, e)
		}
		b.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		b.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				b.WriteByte(',')
			}
			refWriteJSON(b, k)
			b.WriteByte(':')
			refWriteJSON(b, x[k])
		}
		b.WriteByte('}')
	default:
		panic("reference: not a JSON value")
	}
}

// refFormatNumber: shortest round-trip digits; plain decimal notation in
// [1e-6, 1e21) and exponent notation outside it, the convention of the
// JavaScript evaluator the policy language comes from (the issue does not
// fix where exponents start).
func refFormatNumber(f float64) string {
	if f == 0 {
		return "0"
	}
	if a := math.Abs(f); a < 1e-6 || a >= 1e21 {
		mant, exp, _ := strings.Cut(strconv.FormatFloat(f, 'e', -1, 64), "e")
		n, _ := strconv.Atoi(exp)
		if n >= 0 {
			return mant + "e+" + strconv.Itoa(n)
		}
		return mant + "e" + strconv.Itoa(n)
	}
	return strconv.FormatFloat(f, 'f', -1, 64)
}

var refRuleID = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// refPolicyProblems lists what the contract makes a compile error.
func refPolicyProblems(p Policy) []string {
	var out []string
	if p.ID == "" {
		out = append(out, "no name")
	}
	if p.DefaultEffect != "" && p.DefaultEffect != "allow" && p.DefaultEffect != "deny" {
		out = append(out, "defaultEffect")
	}
	if len(p.Rules) < 1 || len(p.Rules) > 1000 {
		out = append(out, "rule count")
	}
	if p.Evaluation != "" && p.Evaluation != "ordered" && p.Evaluation != "tiered" {
		out = append(out, "evaluation")
	}
	ids := map[string]bool{}
	for _, r := range p.Rules {
		if len(r.ID) > 63 || !refRuleID.MatchString(r.ID) {
			out = append(out, "rule id")
		}
		if ids[r.ID] {
			out = append(out, "duplicate rule id")
		}
		ids[r.ID] = true
		switch r.Effect {
		case "allow", "deny", "warn", "audit", "ask", "redact":
		default:
			out = append(out, "effect")
		}
		out = append(out, refPhaseProblems(r)...)
		// Issue 27: approval on ask rules only; its timeout a positive Go
		// duration of at most an hour.
		if r.Approval != nil {
			if r.Effect != "ask" {
				out = append(out, "approval on a rule that does not ask")
			} else if t := r.Approval.Timeout; t != "" {
				if d, err := time.ParseDuration(t); err != nil || d <= 0 || d > time.Hour {
					out = append(out, "approval timeout")
				}
			}
		}
		if r.Priority != 0 && p.Evaluation != "tiered" {
			out = append(out, "priority in an ordered policy")
		}
		out = append(out, refRuleFilterProblems(r)...)
		if len(r.Conditions) > 64 {
			out = append(out, "condition count")
		}
		for _, c := range r.Conditions {
			out = append(out, refGroupProblems(c, 0)...)
		}
	}
	return out
}

func refConditionProblems(c Condition) []string {
	var out []string
	bad := func(why string) { out = append(out, why) }
	if c.Field == "" || len(c.Field) > 256 {
		bad("field length")
	}
	segs := strings.Split(c.Field, ".")
	if len(segs) > 16 {
		bad("field depth")
	}
	for _, s := range segs {
		if s == "" || s == "__proto__" || s == "constructor" || s == "prototype" {
			bad("field segment")
		}
	}
	hasValue, hasValues := len(c.Value) > 0, c.Values != nil
	value, valueOK := refJSON(c.Value)
	isString := func(v any) bool { _, ok := v.(string); return ok }
	isNumber := func(v any) bool { _, ok := v.(float64); return ok }
	isScalar := func(v any) bool {
		switch v.(type) {
		case string, float64, bool:
			return true
		}
		return false
	}
	single := func(ok func(any) bool) {
		if !hasValue || hasValues || !valueOK || !ok(value) {
			bad("value")
		}
	}
	if c.CastToNumber {
		castable := func(v any) bool { _, ok := refCastValue(v); return ok }
		switch c.Operator {
		case "eq", "neq", "gt", "gte", "lt", "lte":
			single(castable)
		case "in", "not_in":
			switch {
			case hasValue && hasValues:
				bad("both")
			case hasValue:
				single(castable)
			case len(c.Values) == 0:
				bad("no values")
			}
			for _, raw := range c.Values {
				if v, ok := refJSON(raw); !ok || !castable(v) {
					bad("values")
				}
			}
		default:
			bad("castToNumber on another operator")
		}
		return out
	}
	switch c.Operator {
	case "exists", "not_exists", "is_empty", "is_not_empty", "is_valid_json":
		if hasValue || hasValues {
			bad("takes no value")
		}
	case "eq", "neq":
		single(isScalar)
	case "contains", "not_contains", "starts_with", "ends_with":
		single(isString)
	case "gt", "gte", "lt", "lte":
		single(isNumber)
	case "matches":
		single(isString)
		if s, ok := value.(string); ok {
			if len(s) > 4096 {
				bad("pattern length")
			} else if _, err := re2.Compile(s); err != nil {
				bad("pattern")
			}
		}
	case "detect":
		out = append(out, refDetectProblems(c)...)
	case "in", "not_in":
		switch {
		case hasValue && hasValues:
			bad("both")
		case hasValue:
			single(isScalar)
		case len(c.Values) == 0:
			bad("no values")
		}
		for _, raw := range c.Values {
			if v, ok := refJSON(raw); !ok || !isScalar(v) {
				bad("values")
			}
		}
	default:
		bad("operator")
	}
	return out
}

func refJSON(raw json.RawMessage) (any, bool) {
	var v any
	err := json.Unmarshal(raw, &v)
	return v, err == nil
}
