package engine

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// validityMismatch describes the first policy the engine and the reference
// disagree is valid, or Compile's diagnostics disagreeing with them both.
func validityMismatch(b Bundle, diags []Diagnostic) string {
	anyInvalid := false
	for _, p := range b.Policies {
		engineOK, refOK := len(CheckPolicy(p)) == 0, len(refPolicyProblems(p)) == 0
		if engineOK != refOK {
			return fmt.Sprintf("policy %q: engine valid=%v (%v), reference valid=%v (%v)\n%s",
				p.ID, engineOK, CheckPolicy(p), refOK, refPolicyProblems(p), mustJSON(p))
		}
		anyInvalid = anyInvalid || !refOK
	}
	if anyInvalid != (len(diags) > 0) {
		return fmt.Sprintf("Compile diagnostics %v, but per-policy validity says invalid=%v", diags, anyInvalid)
	}
	return ""
}

// differential evaluates reqs against b with the engine and the reference
// evaluator and describes the first disagreement, or returns "".
func differential(b Bundle, reqs []map[string]any) string {
	c, diags := Compile(b)
	if d := validityMismatch(b, diags); d != "" {
		return d
	}
	for _, req := range reqs {
		want := refEvaluate(b, req, t0)
		// Seed 000's model, as it was, must say the same: the new one
		// changed nothing for a bundle that does not use it.
		old, oldReason := refEvaluate000(b, req, t0)
		full := refGateway(b, req, t0, nil)
		if old != want || (old.Code == "" && oldReason != full.Reason) {
			return fmt.Sprintf("reference: seed 000 gives %+v (reason %q), issue 9's model %+v\nbundle: %s\nrequest: %s",
				old, oldReason, full, mustJSON(b), mustJSON(req))
		}
		for _, explain := range []bool{false, true} {
			res := c.Evaluate(Request(req), EvalOptions{Now: fixedClock(t0), Budget: time.Hour, Explain: explain})
			got := refOutcome{res.Decision, res.Code, res.MatchedPolicyID, res.MatchedPolicyVersion, res.MatchedRuleID}
			same := got.Decision == want.Decision && got.Code == want.Code
			switch {
			case want.Code == "":
				same = same && got == want
			case want.Code == CodePolicyCompileError:
				same = same && strings.Contains(res.Reason, want.PolicyID)
			}
			if !same {
				return fmt.Sprintf("explain=%v: engine %+v (reason %q), reference %+v\nbundle: %s\nrequest: %s",
					explain, got, res.Reason, want, mustJSON(b), mustJSON(req))
			}
			if msg := compareGateway(res, full); msg != "" {
				return fmt.Sprintf("explain=%v: %s\nbundle: %s\nrequest: %s", explain, msg, mustJSON(b), mustJSON(req))
			}
		}
	}
	return ""
}

// compareGateway describes how res differs from the reference's result in
// what the contract fixes, or returns "". Reasons of freezes and empty
// bundles are the engine's to word; a compile error's must name the policy.
func compareGateway(res Result, want refResult) string {
	got := refOutcome{res.Decision, res.Code, res.MatchedPolicyID, res.MatchedPolicyVersion, res.MatchedRuleID}
	describe := func(what string) string {
		return fmt.Sprintf("%s: engine %+v effect %q resource %+v reason %q warnings %q; reference %+v effect %q resource %+v reason %q warnings %q",
			what, got, res.Effect, res.MatchedResource, res.Reason, res.Warnings,
			want.refOutcome, want.Effect, want.Resource, want.Reason, want.Warnings)
	}
	if got.Decision != want.Decision || got.Code != want.Code {
		return describe("decision or code")
	}
	if res.Effect != want.Effect {
		return describe("effect")
	}
	if res.ApprovalTimeout != want.Timeout {
		return describe(fmt.Sprintf("approval timeout: engine %v, reference %v", res.ApprovalTimeout, want.Timeout))
	}
	if res.ExceptionApplied != want.ExceptionApplied {
		return describe(fmt.Sprintf("exceptionApplied: engine %q, reference %q", res.ExceptionApplied, want.ExceptionApplied))
	}
	if !slices.Equal(res.Shadow, want.Shadow) {
		return describe(fmt.Sprintf("shadow: engine %+v, reference %+v", res.Shadow, want.Shadow))
	}
	switch want.Code {
	case "", CodeImplicitDeny, "APPROVAL_REQUIRED":
	case CodePolicyCompileError:
		if !strings.Contains(res.Reason, want.PolicyID) {
			return describe("compile error reason")
		}
		return ""
	default:
		return ""
	}
	switch {
	case got != want.refOutcome:
		return describe("matched ids")
	case res.MatchedResource != want.Resource:
		return describe("matchedResource")
	case res.Reason != want.Reason:
		return describe("reason")
	case (res.Warnings == nil) != (want.Warnings == nil) || !slices.Equal(res.Warnings, want.Warnings):
		return describe("warnings")
	case res.MatchedPolicyKind != want.Kind:
		return describe(fmt.Sprintf("matchedPolicyKind: engine %q, reference %q", res.MatchedPolicyKind, want.Kind))
	}
	return ""
}

// gatewayDifferential holds the engine to the reference on a bundle that
// uses issue 9's fields, judged at now with u's earlier calls.
func gatewayDifferential(b Bundle, reqs []map[string]any, now time.Time, u *refUsage) string {
	c, diags := Compile(b)
	if d := validityMismatch(b, diags); d != "" {
		return d
	}
	var usage Usage
	if len(u.calls) > 0 {
		usage = u
	}
	for _, req := range reqs {
		want := refGateway(b, req, now, u)
		for _, explain := range []bool{false, true} {
			shared, asked := u.sharedFor(b, req, now)
			res := c.Evaluate(Request(req), EvalOptions{Now: fixedClock(now), Budget: time.Hour, Explain: explain, Usage: usage, Shared: shared})
			msg := compareGateway(res, want)
			if msg == "" && asked != nil && len(asked.problems) > 0 {
				msg = "shared usage asked amiss: " + strings.Join(asked.problems, "; ")
			}
			if msg == "" && explain {
				msg = compareTrace(b, res.Trace, req, now, u)
			}
			if msg == "" && explain && want.Code != CodePolicyCompileError {
				msg = compareVerdicts(res.Verdicts, want.Verdicts)
			}
			if msg != "" {
				return fmt.Sprintf("explain=%v now=%s: %s\nbundle: %s\nrequest: %s\nusage: %s\nshared (on %v): %s",
					explain, now.Format(time.RFC3339), msg, mustJSON(b), mustJSON(req), mustJSON(u.calls), u.sharedOn, mustJSON(u.shared))
			}
		}
		// A trace cut short changes nothing else.
		bound := 1 + len(mustJSON(req))%4
		shared, _ := u.sharedFor(b, req, now)
		res := c.Evaluate(Request(req), EvalOptions{Now: fixedClock(now), Budget: time.Hour, Explain: true, MaxTrace: bound, Usage: usage, Shared: shared})
		msg := compareGateway(res, want)
		if n := traceEntries(res.Trace); msg == "" && n > bound {
			msg = fmt.Sprintf("trace of %d entries, bound %d", n, bound)
		}
		if msg != "" {
			return fmt.Sprintf("max trace %d now=%s: %s\nbundle: %s\nrequest: %s\nusage: %s",
				bound, now.Format(time.RFC3339), msg, mustJSON(b), mustJSON(req), mustJSON(u.calls))
		}
	}
	return ""
}

// compareTrace checks that every rule the trace shows names the first
// filter that failed as the reference finds it (or none when it matched).
// A tiered policy's rules bound to resources are left out at its tool
// level: they are never candidates there, and the contract does not say
// whether the trace shows them or as which filter.
func compareTrace(b Bundle, trace []TraceRule, req map[string]any, now time.Time, u *refUsage) string {
	call := refRead(req)
	for _, tr := range trace {
		if tr.RuleIndex < 0 {
			continue
		}
		var p *Policy
		same := 0
		for i := range b.Policies {
			if b.Policies[i].ID == tr.PolicyID {
				p = &b.Policies[i]
				same++
			}
		}
		if same > 1 {
			continue // which of the namesakes is not in the trace
		}
		if p == nil || tr.RuleIndex >= len(p.Rules) {
			return fmt.Sprintf("trace names rule %d of policy %q, which does not exist", tr.RuleIndex, tr.PolicyID)
		}
		r := p.Rules[tr.RuleIndex]
		// Scopes the entry may be about: a request may list one resource
		// twice, with different tags.
		scopes := []refScope{{mode: "ordered"}}
		if p.Evaluation == EvaluationTiered {
			scopes = []refScope{{mode: "tool"}}
			if tr.Resource != nil {
				scopes = nil
				for i := range call.resources {
					if call.resources[i].ref == *tr.Resource {
						scopes = append(scopes, refScope{mode: "resource", resource: &call.resources[i]})
					}
				}
				if scopes == nil {
					return fmt.Sprintf("trace of rule %q names resource %+v, which the request does not touch", r.ID, *tr.Resource)
				}
			} else if refHasResourceTargets(r) {
				continue
			}
		}
		// A rule an exception exempted held, and counts as not matching.
		if tr.Exception != "" {
			held := slices.ContainsFunc(scopes, func(sc refScope) bool { return refFilter(r, call, sc, now, u) == "" })
			if tr.Matched || tr.Failed != "" || !held || !refExempt(b.Exceptions, req, now)(p.Kind, p.ID, r.ID) {
				return fmt.Sprintf("trace of rule %q of policy %q: exception %q, matched %v, failed %q; reference: held %v", r.ID, p.ID, tr.Exception, tr.Matched, tr.Failed, held)
			}
			continue
		}
		// A rule with only conditions reads as it did before issue 9,
		// whose trace had no failed key: its failed filter goes unnamed.
		plain := r.Subjects == nil && r.Targets == nil && r.Select == nil && r.When == nil
		var wants []string
		ok := false
		for _, sc := range scopes {
			want := refFilter(r, call, sc, now, u)
			wants = append(wants, want)
			switch {
			case tr.Matched != (want == ""):
			case tr.Failed == want, plain && tr.Failed == "":
				ok = true
			}
		}
		if !ok {
			return fmt.Sprintf("trace of rule %q of policy %q (resource %v): failed %q matched %v, reference: failed %q",
				r.ID, p.ID, tr.Resource, tr.Failed, tr.Matched, wants)
		}
	}
	return ""
}

// compareVerdicts: the trace's verdicts are the reference's, evaluation by
// evaluation: the outcome, and for a match the deciding tier, rule and
// effect (what a verdict without a match carries besides is the engine's).
// The engine may leave out a policy that contributed nothing (no match and
// no opinion everywhere), such as one without rules for the tool.
func compareVerdicts(got []TraceVerdict, want [][]TraceVerdict) string {
	show := func(vs []TraceVerdict) string {
		var out []string
		for _, v := range vs {
			s := v.PolicyID + ":" + v.Outcome
			if v.Resource != nil {
				s += "@" + v.Resource.Type + "/" + v.Resource.Name
			}
			if v.Outcome == OutcomeMatch && v.Tier != nil {
				s += fmt.Sprintf("[%d %s %s]", *v.Tier, v.RuleID, v.Effect)
			}
			out = append(out, s)
		}
		return strings.Join(out, " ")
	}
	same := func(g, w TraceVerdict) bool {
		ok := g.PolicyID == w.PolicyID && g.Outcome == w.Outcome && (g.Resource == nil) == (w.Resource == nil) &&
			(g.Resource == nil || *g.Resource == *w.Resource)
		if ok && w.Outcome == OutcomeMatch {
			ok = g.Tier != nil && *g.Tier == *w.Tier && g.RuleID == w.RuleID && g.Effect == w.Effect
		}
		return ok
	}
	var all []TraceVerdict
	for _, group := range want {
		all = append(all, group...)
	}
	// fits: got[at:] is want[g:] with some silent groups left out (tried
	// both ways: policies may share a name).
	var fits func(g, at int) bool
	fits = func(g, at int) bool {
		if g == len(want) {
			return at == len(got)
		}
		group := want[g]
		if len(got)-at >= len(group) {
			eq := true
			for i := range group {
				eq = eq && same(got[at+i], group[i])
			}
			if eq && fits(g+1, at+len(group)) {
				return true
			}
		}
		silent := !slices.ContainsFunc(group, func(w TraceVerdict) bool {
			return w.Outcome == OutcomeMatch || w.Outcome == OutcomeImplicitDeny
		})
		return silent && fits(g+1, at)
	}
	if !fits(0, 0) {
		return fmt.Sprintf("verdicts: engine %s; reference %s", show(got), show(all))
	}
	return ""
}

func generatedGatewayCase(data []byte) (Bundle, []map[string]any, time.Time, *refUsage) {
	g := &genSource{data: data}
	now := pickFrom(g, gwNows...)
	b := g.gwBundle(now)
	g.castifyBundle(&b)
	u := g.gwUsage(now)
	reqs := []map[string]any{g.gwRequest(), g.gwRequest(), g.gwRequest()}
	return b, reqs, now, u
}

// gatewayOutcome classifies a reference result, for the coverage check.
func gatewayOutcome(out refResult) []string {
	keys := []string{string(out.Decision) + "/" + string(out.Effect) + "/" + string(out.Code)}
	if out.RuleID != "" {
		keys = append(keys, "rule/"+string(out.Effect))
	}
	if out.Resource != (ResourceRef{}) {
		keys = append(keys, "resource/"+string(out.Effect))
	}
	if len(out.Warnings) > 0 {
		keys = append(keys, "warnings/"+string(out.Decision))
	}
	if len(out.Warnings) > 1 {
		keys = append(keys, "warnings>1")
	}
	return keys
}

// TestGatewayDifferential runs the engine and the reference on pseudo-random
// bundles using issue 9's fields, ordered and tiered, from a fixed seed.
func TestGatewayDifferential(t *testing.T) {
	t.Parallel()
	const cases = 3000
	var mismatches []string
	outcomes := map[string]int{}
	for _, data := range gatewayInputs(cases) {
		b, reqs, now, u := generatedGatewayCase(data)
		if msg := gatewayDifferential(b, reqs, now, u); msg != "" {
			mismatches = append(mismatches, msg)
		}
		for _, req := range reqs {
			for _, k := range gatewayOutcome(refGateway(b, req, now, u)) {
				outcomes[k]++
			}
		}
	}
	for i, m := range mismatches[:min(len(mismatches), 3)] {
		t.Errorf("mismatch %d: %s", i, m)
	}
	if len(mismatches) > 0 {
		t.Errorf("%d of %d cases differ", len(mismatches), cases)
	}
	t.Logf("reference outcomes over %d requests: %v", 3*cases, outcomes)
	// Agreement means little unless the generator reaches every kind of
	// result the model has.
	for _, k := range []string{"allow/allow/", "allow/warn/", "allow/audit/", "deny/deny/", "deny/deny/IMPLICIT_DENY",
		"deny/deny/POLICY_COMPILE_ERROR", "ask/ask/APPROVAL_REQUIRED", "rule/allow", "rule/deny", "rule/warn", "rule/audit", "rule/ask",
		"resource/deny", "resource/allow", "resource/warn", "resource/audit", "resource/ask", "warnings/ask",
		"warnings/allow", "warnings/deny", "warnings>1"} {
		if outcomes[k] < cases/300 {
			t.Errorf("outcome %s happened %d times in %d requests: %v", k, outcomes[k], 3*cases, outcomes)
		}
	}
}

func FuzzGatewayDifferential(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("toolgate gateway seed: mcp__db__query orders pii 23:59 Europe/Berlin"))
	for _, seed := range gatewayInputs(100) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, reqs, now, u := generatedGatewayCase(data)
		if msg := gatewayDifferential(b, reqs, now, u); msg != "" {
			t.Fatal(msg)
		}
	})
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return string(b)
}

func generatedCase(data []byte) (Bundle, []map[string]any) {
	g := &genSource{data: data}
	b := g.bundle(t0)
	// Issue 28's castToNumber, marked here: the old generator's cases stay
	// what TestOrderedResultsUnchanged's digest was taken over.
	g.castifyBundle(&b)
	// The last request carries issue 9's fields, which a bundle that does
	// not use them must not notice.
	reqs := []map[string]any{g.request(), g.request(), g.request(), g.gwRequest()}
	return b, reqs
}

// differentialInputs is a fixed pseudo-random stream of generator inputs.
func differentialInputs(n int) [][]byte {
	rng := rand.New(rand.NewPCG(20261103, 2))
	out := make([][]byte, n)
	for k := range out {
		out[k] = make([]byte, 160)
		for i := range out[k] {
			out[k][i] = byte(rng.Uint32())
		}
	}
	return out
}

// gatewayInputs is like differentialInputs, with inputs long enough for a
// gateway case's many choices (an input that runs out makes every later
// choice the first option).
func gatewayInputs(n int) [][]byte {
	rng := rand.New(rand.NewPCG(20261201, 9))
	out := make([][]byte, n)
	for k := range out {
		out[k] = make([]byte, 1024)
		for i := range out[k] {
			out[k][i] = byte(rng.Uint32())
		}
	}
	return out
}

// TestDifferential runs the engine and the reference on pseudo-random cases
// from a fixed seed, so a plain `go test` shows the two agree.
func TestDifferential(t *testing.T) {
	t.Parallel()
	const cases = 3000
	var mismatches []string
	decisions := map[string]int{}
	for _, data := range differentialInputs(cases) {
		b, reqs := generatedCase(data)
		if msg := differential(b, reqs); msg != "" {
			mismatches = append(mismatches, msg)
		}
		for _, req := range reqs {
			out := refEvaluate(b, req, t0)
			key := string(out.Decision) + "/" + string(out.Code)
			if out.Code == "" && out.RuleID != "" {
				key += "/rule"
			}
			decisions[key]++
		}
	}
	for i, m := range mismatches[:min(len(mismatches), 3)] {
		t.Errorf("mismatch %d: %s", i, m)
	}
	if len(mismatches) > 0 {
		t.Errorf("%d of %d cases differ", len(mismatches), cases)
	}
	t.Logf("reference outcomes over %d requests: %v", 4*cases, decisions)
	// The generator must reach every kind of outcome, or agreement means
	// little.
	for _, k := range []string{"allow/", "deny/", "allow//rule", "deny//rule", "deny/AGENT_FROZEN", "deny/NO_POLICIES", "deny/POLICY_COMPILE_ERROR"} {
		if decisions[k] < cases/100 {
			t.Errorf("outcome %s happened %d times in %d requests: %v", k, decisions[k], 4*cases, decisions)
		}
	}
}

func FuzzDifferential(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f"))
	f.Add([]byte("toolgate differential fuzzing seed: rm -rf / && pay 5000"))
	// The start of TestDifferential's stream: random enough to reach every
	// outcome, so mutations start from cases that exercise the engine.
	for _, seed := range differentialInputs(200) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, reqs := generatedCase(data)
		if msg := differential(b, reqs); msg != "" {
			t.Fatal(msg)
		}
	})
}

// FuzzCompile feeds arbitrary bytes as a bundle document. Compile must not
// panic, must agree with CheckPolicy, and a bundle with any diagnostic must
// never allow (an allow means every policy was reached, the broken one too).
func FuzzCompile(f *testing.F) {
	for _, b := range []Bundle{
		{},
		{Policies: []Policy{samplePolicy()}, FrozenAgents: []FrozenAgent{{ID: "agent-1", Reason: "incident"}}},
		{Policies: []Policy{{ID: "p", DefaultEffect: "deny", Rules: []Rule{{ID: "r", Effect: "allow", Conditions: []Condition{
			{Field: "input..x", Operator: "matches", Value: raw("(?=x)")}, {Field: "tool_name", Operator: "in", Values: []json.RawMessage{raw(5), raw("Bash")}}}}}}}},
		// A version 2 document, so mutations reach every new field.
		{Policies: []Policy{gatewayValidPolicy(), samplePolicy()}},
	} {
		doc, _, err := Encode(b)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(doc)
		f.Add([]byte(mustJSON(b)))
	}
	f.Add([]byte(`{"policies":[{"id":"p","rules":[{"id":"r","effect":"deny","conditions":[{"field":"a","operator":"in","values":[null,{},[]]}]}]}]}`))
	f.Add([]byte(`{"policies":[{"id":"p","rules":[{"id":"r","effect":"deny","conditions":[{"field":"a","operator":"gt","value":"1"},{"field":"","operator":"??"}]}]}]}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		b, err := Decode(doc)
		if err == nil {
			again, _, err := Encode(b)
			if err != nil {
				t.Fatalf("a decoded bundle does not encode: %v", err)
			}
			if _, err := Decode(again); err != nil {
				t.Fatalf("a re-encoded bundle does not decode: %v", err)
			}
		} else if json.Unmarshal(doc, &b) != nil {
			return
		}
		c, diags := Compile(b)
		checked := 0
		for _, p := range b.Policies {
			for _, d := range CheckPolicy(p) {
				checked++
				if d.PolicyID != p.ID || d.Field == "" || d.Message == "" || d.RuleIndex >= len(p.Rules) {
					t.Errorf("malformed diagnostic %+v", d)
				}
				if d.RuleIndex >= 0 && d.ConditionIndex >= len(p.Rules[d.RuleIndex].Conditions) {
					t.Errorf("diagnostic names a condition that does not exist: %+v", d)
				}
			}
		}
		if checked != len(diags) {
			t.Errorf("Compile gave %d diagnostics, CheckPolicy %d", len(diags), checked)
		}
		for _, req := range []Request{
			{"tool_name": "Bash", "agent_id": "agent-1", "input": map[string]any{"command": "rm -rf /"}},
			{"tool_name": "Read", "kwargs": map[string]any{"amount": 5000.0}, "args": []any{"a", map[string]any{"x": nil}}},
		} {
			res := c.Evaluate(req, EvalOptions{Now: fixedClock(t0), Explain: true})
			checkInvariants(t, res)
			if len(diags) > 0 && res.Decision == Allow {
				t.Errorf("a bundle with diagnostics allowed: %+v\n%v", res, diags)
			}
			if out, err := res.AppendJSON(nil); err != nil || !json.Valid(out) {
				t.Errorf("result JSON %q: %v", out, err)
			}
		}
	})
}

// fuzzEvaluateBundle exercises every operator, the tool index, priorities,
// defaults and freezes.
func fuzzEvaluateBundle() Bundle {
	later, earlier := t0.Add(time.Hour), t0.Add(-time.Hour)
	vals := func(vs ...any) []json.RawMessage {
		var out []json.RawMessage
		for _, v := range vs {
			out = append(out, raw(v))
		}
		return out
	}
	return Bundle{
		FrozenAgents: []FrozenAgent{{ID: "agent-\u212a", ExpiresAt: &later}, {ID: "old", ExpiresAt: &earlier}, {ID: "Rogue"}},
		Policies: []Policy{
			samplePolicy(),
			{ID: "baseline", Version: 3, DefaultEffect: "deny", Rules: []Rule{
				allowRule("bash-ls", cond("tool_name", "eq", "Bash"), cond("input.command", "starts_with", "ls")),
				allowRule("args", Condition{Field: "args.0", Operator: "exists"}, cond("args.1.x", "neq", "x")),
				allowRule("no-kwargs", Condition{Field: "kwargs", Operator: "is_empty"}, cond("tool_name", "ends_with", "d")),
				allowRule("not-listed", Condition{Field: "tool_name", Operator: "not_in", Values: vals("Bash", "Edit", "pay", 5)}),
				allowRule("small", cond("kwargs.n", "lte", 5), cond("kwargs.n", "gte", -5.5)),
				denyRule("lt-string", cond("kwargs.n", "lt", -100)),
				allowRule("json", Condition{Field: "input.payload", Operator: "is_valid_json"}),
				denyRule("not-exists", Condition{Field: "session_id", Operator: "not_exists"}, cond("tool_name", "eq", "Edit")),
				allowRule("set", Condition{Field: "kwargs.n", Operator: "in", Values: vals(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, "x", true)}),
				denyRule("not-contains", cond("input", "not_contains", "command"), cond("tool_name", "eq", "Write")),
				allowRule("not-empty", Condition{Field: "input.command", Operator: "is_not_empty"}, cond("tool_name", "in", "Write")),
			}},
			{ID: "zeta", Priority: -1, DefaultEffect: "allow", Rules: []Rule{
				denyRule("objects", cond("kwargs", "contains", `"flag":true`)),
				denyRule("null", cond("input.command", "eq", "null")),
				allowRule("gt", cond("kwargs.amount", "gt", 0)),
			}},
		},
	}
}

// samplePolicy is the README's guard: rm -rf, a payment cap, MCP writes.
func samplePolicy() Policy {
	return Policy{ID: "guard", Version: 2, Priority: 10, DefaultEffect: "allow", Rules: []Rule{
		{ID: "no-rm-rf", Effect: "deny", Description: "rm -rf is never allowed",
			Conditions: []Condition{cond("tool_name", "eq", "Bash"), cond("input.command", "matches", `\brm\s+-[a-z]*r[a-z]*f`)}},
		denyRule("pay-cap", cond("tool_name", "eq", "pay"), cond("kwargs.amount", "gt", 1000)),
		denyRule("mcp-writes", cond("tool_name", "matches", `^mcp__github__(create|delete|update)_`)),
		denyRule("secrets", cond("input", "matches", `(?i)password=\S+`)),
		allowRule("read-only", Condition{Field: "tool_name", Operator: "in", Values: []json.RawMessage{raw("Read"), raw("Grep"), raw("Glob")}}),
	}}
}

// FuzzEvaluate feeds arbitrary request documents to a fixed bundle: no
// panic, allow or deny only, every coded result a deny, and the reference
// evaluator agrees.
func FuzzEvaluate(f *testing.F) {
	for _, doc := range []string{
		`{"tool_name":"Bash","input":{"command":"rm -rf /"}}`,
		`{"tool_name":"Bash","agent_id":"AGENT-K","input":{"command":"ls"}}`,
		`{"tool_name":"pay","kwargs":{"amount":"5000"}}`,
		`{"tool_name":"pay","kwargs":{"amount":999.5}}`,
		`{"tool_name":"mcp__github__create_issue","input":{}}`,
		`{"tool_name":"Read","args":["a",{"x":"y"}],"kwargs":{}}`,
		`{"tool_name":"Edit","input":{"payload":"{\"a\":[1,2]}"},"kwargs":{"n":3}}`,
		`{"tool_name":"Write","input":{"command":null},"session_id":"s"}`,
		`{"tool_name":5,"agent_id":"old","kwargs":{"n":"-101","flag":true}}`,
		`{"tool_name":"Bash","input":{"command":"echo password=hunter2 && ls"}}`,
		`{"agent_id":"rogue"}`,
		`[]`, `null`, `{"tool_name":`, `{"tool_name":"x"} trailing`,
	} {
		f.Add([]byte(doc))
	}
	bundle := fuzzEvaluateBundle()
	c := mustCompile(f, bundle)
	f.Fuzz(func(t *testing.T, doc []byte) {
		req, err := DecodeRequest(doc)
		if err != nil {
			// The engine must also survive requests the decoder would
			// refuse (no or non-string tool_name).
			var m map[string]any
			if json.Unmarshal(doc, &m) != nil || m == nil {
				return
			}
			req = m
		}
		want := refEvaluate(bundle, req, t0)
		// A bounded trace (cut short by some requests' length) must not
		// change the decision either.
		for _, o := range []EvalOptions{{}, {Explain: true}, {Explain: true, MaxTrace: 1 + len(doc)%5}} {
			explain := o.Explain
			o.Now = fixedClock(t0)
			res := c.Evaluate(req, o)
			checkInvariants(t, res)
			got := refOutcome{res.Decision, res.Code, res.MatchedPolicyID, res.MatchedPolicyVersion, res.MatchedRuleID}
			if got.Code != "" {
				got.PolicyID, got.Version = "", 0
			}
			if got != want {
				t.Fatalf("explain=%v max trace %d: engine %+v, reference %+v for %s", explain, o.MaxTrace, got, want, doc)
			}
			if n := traceEntries(res.Trace); o.MaxTrace > 0 && n > o.MaxTrace {
				t.Fatalf("trace of %d entries, bound %d", n, o.MaxTrace)
			}
			if out, err := res.AppendJSON(nil); err != nil || !json.Valid(out) {
				t.Fatalf("result JSON %q: %v", out, err)
			}
		}
	})
}
