package engine

import (
	"fmt"
	"maps"
	"strings"

	"github.com/toolgate/toolgate/engine/detect"
	"github.com/toolgate/toolgate/engine/internal/jsonvalue"
	"github.com/toolgate/toolgate/engine/sentence"
)

// evaluateResult is a result evaluation: the scan over the result views
// (a bundle without result rules lets every result go on), then what only
// results have: an explanation per result rule that ran and, for a redact
// decision, the spans to replace and the output as it is delivered.
func (c *Compiled) evaluateResult(req Request, opts *EvalOptions, clk *clock, tr *tracer, out *Result) {
	if opts.Phase != PhaseResult {
		out.Decision, out.Code = Deny, CodeUnknownPhase
		out.Reason = fmt.Sprintf("unknown evaluation phase %q (want %s or %s)", jsonvalue.Truncate(string(opts.Phase), 64), PhaseCall, PhaseResult)
		return
	}
	if c.results == nil {
		out.Decision = Allow
		c.shadow(req, opts, out)
		return
	}
	if c.scan(req, opts, clk, tr, out, false) != "" {
		c.exceptionChanged(req, opts, clk, out)
	}
	if out.Code != CodeEvalTimeout {
		c.judge(req, opts, clk, out)
	}
	c.shadow(req, opts, out)
}

// judge writes the explanations of every result rule that ran (its
// subjects, targets, select and when held), in scan order (policies in
// evaluation order, each one's rules in spec order), and, for a redact
// decision, the redactions of every redact rule that matched (and no
// exception exempted) and the redacted output.
func (c *Compiled) judge(req Request, opts *EvalOptions, clk *clock, out *Result) {
	s := c.scratch.Get().(*scratch)
	defer c.scratch.Put(s)
	s.reset(req, clk.start, opts.Usage, opts.Shared)
	s.outputTruncated = opts.OutputTruncated
	budget := opts.Budget
	if budget <= 0 {
		budget = DefaultBudget
	}
	e := run{c: c, s: s, clk: clk, budget: budget, serviceAccount: opts.ServiceAccount}
	redact := out.Effect == EffectRedact && !opts.OutputTruncated
	output, _ := req[FieldOutput].(map[string]any)
	text, _ := output[OutputText].(string)
	var spans []Redaction
	for pi := range c.results {
		p := &c.results[pi]
		if p.compileError != "" {
			continue
		}
		for _, ri := range p.inPhase {
			r := &p.rules[ri]
			if r.filtered && s.gatewayFailed(r, modeOrdered) != filterNone {
				continue
			}
			x := c.explainResultRule(s, p, r)
			out.Explanations = append(out.Explanations, x)
			if redact && x.Passed && r.effect == EffectRedact && c.textSlot >= 0 && e.exemptBy(r) == "" {
				for i := range r.conditions {
					spans = c.collectSpans(s, &r.conditions[i], text, spans, p.id, r.id)
				}
			}
			e.steps++
			// Judging reads every condition of every rule that ran (and
			// every match of a redact rule) over a text of up to
			// --max-result-bytes: it has the scan's budget, and a result
			// past it is withheld, never delivered unjudged.
			if clk.elapsed() > budget {
				*out = Result{Explanations: out.Explanations}
				e.timeout(out)
				return
			}
		}
	}
	if !redact {
		return
	}
	out.Redactions = MergeRedactions(spans)
	if output != nil {
		out.Output = maps.Clone(output)
		if _, has := output[OutputText]; has {
			out.Output[OutputText] = ApplyRedactions(text, out.Redactions)
		}
	}
}

// explainResultRule evaluates every condition of r (no short cut) for its
// score, and words the first that failed, or the first that held.
func (c *Compiled) explainResultRule(s *scratch, p *cpolicy, r *crule) Explanation {
	x := Explanation{PolicyID: p.id, RuleID: r.id, Effect: r.effect, Passed: true, Score: 1}
	if len(r.conditions) == 0 {
		x.Sentence = sentence.NoConditions
		return x
	}
	held, failed, first := 0, -1, -1
	for i := range r.conditions {
		if c.holds(s, &r.conditions[i]) {
			held++
			if first < 0 {
				first = i
			}
		} else if failed < 0 {
			failed = i
		}
	}
	x.Score = float64(held) / float64(len(r.conditions))
	x.Passed = failed < 0
	if failed >= 0 {
		first = failed
	}
	x.Condition = first + 1
	x.Sentence = sentence.Condition(first, c.phrase(s, &r.conditions[first], &r.source.Conditions[first]))
	return x
}

// phrase words one condition as it evaluated.
func (c *Compiled) phrase(s *scratch, cc *ccond, src *Condition) string {
	held := c.holds(s, cc)
	switch cc.op {
	case opOutput:
		if s.outputTruncated {
			return sentence.Phrase(sentence.Test{Field: src.Field, Operator: src.Operator, Held: true, Truncated: true})
		}
		return c.phrase(s, &cc.sub[0], src)
	case opAny:
		for i := range cc.sub {
			if c.holds(s, &cc.sub[i]) {
				return sentence.Any(true, len(cc.sub), i, c.phrase(s, &cc.sub[i], &src.Any[i]))
			}
		}
		return sentence.Any(false, len(cc.sub), 0, "")
	case opAll:
		for i := range cc.sub {
			if !c.holds(s, &cc.sub[i]) {
				return sentence.All(false, len(cc.sub), i, c.phrase(s, &cc.sub[i], &src.All[i]))
			}
		}
		return sentence.All(true, len(cc.sub), 0, "")
	}
	v, present := s.value(c, cc.slot)
	t := sentence.Test{Field: src.Field, Operator: src.Operator, Value: src.Value, Values: src.Values, Present: present, Held: held}
	if cc.cast {
		t.Reason = jsonvalue.CastReason(v, present)
	}
	if present && held != (cc.op == opNotContains) {
		if sp := leafSpans(cc, s.str(c, cc.slot, v), nil, false); len(sp) > 0 {
			t.Match = sentence.Span{Start: sp[0].start, Length: sp[0].end - sp[0].start}
			if cc.op == opDetect {
				t.Detector = sp[0].detector.String()
			}
		}
	}
	return sentence.Phrase(t)
}

// collectSpans appends the spans of output.text that the tests of cc
// which held matched: matches, contains and detect, at any depth of a
// group that held.
func (c *Compiled) collectSpans(s *scratch, cc *ccond, text string, dst []Redaction, policy, rule string) []Redaction {
	switch cc.op {
	case opOutput:
		return c.collectSpans(s, &cc.sub[0], text, dst, policy, rule)
	case opAny, opAll:
		for i := range cc.sub {
			if c.holds(s, &cc.sub[i]) {
				dst = c.collectSpans(s, &cc.sub[i], text, dst, policy, rule)
			}
		}
		return dst
	}
	if cc.slot != c.textSlot || !c.holds(s, cc) {
		return dst
	}
	for _, sp := range leafSpans(cc, text, nil, true) {
		dst = append(dst, Redaction{Start: sp.start, End: sp.end, PolicyID: policy, RuleID: rule})
	}
	return dst
}

// span is one match of a test in a field's text.
type span struct {
	start, end int
	detector   detect.Detector
}

// leafSpans appends to dst the matches of test cc in text: every one
// (all), or the first. Only matches, contains, not_contains (its
// occurrences) and detect have them; empty matches are left out.
func leafSpans(cc *ccond, text string, dst []span, all bool) []span {
	switch cc.op {
	case opMatches:
		cc.matcher.Spans(text, all, func(start, end int) { dst = append(dst, span{start: start, end: end}) })
		return dst
	case opContains, opNotContains:
		needle := cc.value.Str
		if needle == "" {
			return dst
		}
		for off := 0; ; {
			i := strings.Index(text[off:], needle)
			if i < 0 {
				return dst
			}
			dst = append(dst, span{start: off + i, end: off + i + len(needle)})
			if off += i + len(needle); !all {
				return dst
			}
		}
	case opDetect:
		if !all {
			if m, ok := cc.scanner.First(text); ok && m.End > m.Start {
				dst = append(dst, span{start: m.Start, end: m.End, detector: m.Detector})
			}
			return dst
		}
		for _, m := range cc.scanner.AppendAll(nil, text) {
			if m.End > m.Start {
				dst = append(dst, span{start: m.Start, end: m.End, detector: m.Detector})
			}
		}
	}
	return dst
}
