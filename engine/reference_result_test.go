package engine

// The reference evaluator's part for issue 28's result rules, written from
// the issue and sharing no code with the engine but the detect package
// (the detectors are its own work; the reference checks how the engine
// wires them): which rules a phase runs, the compile problems of phases,
// redact and detect, and what a result decision carries (explanations,
// scores, redactions).

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/wasilibs/go-re2"

	"github.com/toolgate/toolgate/engine/detect"
)

func refIsResult(r Rule) bool { return r.Phase != "" && r.Phase != "call" }

// refSticky: an ask or a redact decides an ordered scan unless a deny does.
func refSticky(e Effect) bool { return e == "ask" || e == "redact" }

func refReadsWholeOutput(field string) bool {
	return field == "output.text" || field == "output.structured" ||
		strings.HasPrefix(field, "output.text.") || strings.HasPrefix(field, "output.structured.")
}

func refPhaseProblems(r Rule) []string {
	var out []string
	switch r.Phase {
	case "", "call":
		if r.Effect == "redact" {
			out = append(out, "redact on a call rule")
		}
	case "result":
		if r.Effect == "ask" {
			out = append(out, "ask on a result rule")
		}
		if r.When != nil && (r.When.RateLimit != nil || r.When.TokenBudget != nil) {
			out = append(out, "a limit on a result rule")
		}
	default:
		out = append(out, "phase")
	}
	return out
}

// refDetectNames are a detect condition's detector names: value (one) or
// values; ok is false when they are not a non-empty list of known names.
func refDetectNames(c Condition) ([]string, bool) {
	raws := c.Values
	if len(c.Value) > 0 {
		if c.Values != nil {
			return nil, false
		}
		raws = []json.RawMessage{c.Value}
	}
	if len(raws) == 0 {
		return nil, false
	}
	var names []string
	for _, r := range raws {
		var s string
		if json.Unmarshal(r, &s) != nil || !slices.Contains(detect.Names(), s) || slices.Contains(names, s) {
			return nil, false
		}
		names = append(names, s)
	}
	return names, true
}

func refDetectProblems(c Condition) []string {
	if _, ok := refDetectNames(c); !ok {
		return []string{"detectors"}
	}
	return nil
}

func refScanner(c Condition) *detect.Scanner {
	names, _ := refDetectNames(c)
	s, err := detect.New(names...)
	if err != nil {
		panic(err)
	}
	return s
}

// refJudged is what a result decision carries beside the decision.
type refJudged struct {
	explanations []Explanation
	redactions   []Redaction
}

// refJudge: per result rule whose subjects, targets, select and when hold
// (read as an ordered policy reads them), policies in evaluation order
// (the cluster's first) and rules in spec order, the explanation; and when
// the decision is a redact of an output held whole, the spans of every
// redact rule that held and no exception exempts.
func refJudge(b Bundle, req map[string]any, now time.Time, u *refUsage, decided Effect, truncated bool) refJudged {
	var out refJudged
	if agent, ok := req["agent_id"].(string); ok {
		for _, f := range b.FrozenAgents {
			if strings.EqualFold(f.ID, agent) && (f.ExpiresAt == nil || now.Before(*f.ExpiresAt)) {
				return out
			}
		}
	}
	var cluster, ns []Policy
	for _, p := range b.Policies {
		switch {
		case p.Mode == ModeAudit:
		case p.Kind == KindClusterPolicy:
			cluster = append(cluster, p)
		default:
			ns = append(ns, p)
		}
	}
	refSort(cluster)
	refSort(ns)
	call := refRead(req)
	call.result, call.truncated = true, truncated
	exempt := refExempt(b.Exceptions, req, now)
	text, _ := refOutputText(req)
	var spans []Redaction
	for _, p := range append(cluster, ns...) {
		if len(refPolicyProblems(p)) > 0 {
			continue
		}
		kind := ""
		if p.Kind == KindClusterPolicy {
			kind = KindClusterPolicy
		}
		sc := refScope{mode: "ordered"}
		for _, r := range p.Rules {
			if !refIsResult(r) || !refSubjects(r, call) || !refTargets(r, call, sc) || !refSelect(r, call, sc) || !refWhen(r, call, sc, now, u) {
				continue
			}
			x := Explanation{PolicyID: p.ID, RuleID: r.ID, Effect: Effect(r.Effect), Passed: true, Score: 1}
			held, firstHeld, firstFailed := 0, 0, 0
			for i, c := range r.Conditions {
				if refGroupHoldsTruncated(c, req, truncated) {
					held++
					if firstHeld == 0 {
						firstHeld = i + 1
					}
				} else if firstFailed == 0 {
					firstFailed = i + 1
				}
			}
			if n := len(r.Conditions); n > 0 {
				x.Score = float64(held) / float64(n)
				x.Passed = held == n
				x.Condition = firstHeld
				if firstFailed > 0 {
					x.Condition = firstFailed
				}
			}
			out.explanations = append(out.explanations, x)
			if decided == "redact" && !truncated && x.Passed && r.Effect == "redact" && !exempt(kind, p.ID, r.ID) {
				for _, c := range r.Conditions {
					spans = append(spans, refSpans(c, req, text, p.ID, r.ID)...)
				}
			}
		}
	}
	if decided == "redact" && !truncated {
		out.redactions = refMerge(spans)
	}
	return out
}

func refOutputText(req map[string]any) (string, bool) {
	o, _ := req["output"].(map[string]any)
	s, ok := o["text"].(string)
	return s, ok
}

// refSpans are the spans of output.text matched by the tests of c that
// held, inside groups that held.
func refSpans(c Condition, req map[string]any, text, policy, rule string) []Redaction {
	if !refGroupHolds(c, req) {
		return nil
	}
	var out []Redaction
	for _, m := range append(slices.Clone(c.Any), c.All...) {
		out = append(out, refSpans(m, req, text, policy, rule)...)
	}
	if c.Any != nil || c.All != nil || c.Field != "output.text" {
		return out
	}
	add := func(start, end int) {
		if end > start {
			out = append(out, Redaction{Start: start, End: end, PolicyID: policy, RuleID: rule})
		}
	}
	switch c.Operator {
	case "matches":
		var p string
		_ = json.Unmarshal(c.Value, &p)
		for _, loc := range re2.MustCompile(p).FindAllStringIndex(text, -1) {
			add(loc[0], loc[1])
		}
	case "contains":
		var needle string
		_ = json.Unmarshal(c.Value, &needle)
		for i := 0; needle != "" && i <= len(text)-len(needle); {
			if text[i:i+len(needle)] == needle {
				add(i, i+len(needle))
				i += len(needle)
				continue
			}
			i++
		}
	case "detect":
		for _, m := range refScanner(c).AppendAll(nil, text) {
			add(m.Start, m.End)
		}
	}
	return out
}

// refMerge sorts spans by start (stable: ties keep scan order) and folds
// each one that overlaps the one before into it.
func refMerge(spans []Redaction) []Redaction {
	sort.SliceStable(spans, func(i, j int) bool { return spans[i].Start < spans[j].Start })
	var out []Redaction
	for _, s := range spans {
		if len(out) > 0 && s.Start < out[len(out)-1].End {
			if s.End > out[len(out)-1].End {
				out[len(out)-1].End = s.End
			}
			continue
		}
		out = append(out, s)
	}
	return out
}

// refRedact applies merged spans to text.
func refRedact(text string, spans []Redaction) string {
	var b strings.Builder
	last := 0
	for _, s := range spans {
		b.WriteString(text[last:s.Start])
		b.WriteString("[REDACTED:" + s.RuleID + "]")
		last = s.End
	}
	b.WriteString(text[last:])
	return b.String()
}
