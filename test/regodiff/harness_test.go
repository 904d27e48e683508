package regodiff

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/storage/inmem"

	"github.com/toolgate/toolgate/engine"
	torego "github.com/toolgate/toolgate/rego"
)

// pair is one bundle ready on both sides: the engine's compiled form and
// OPA's prepared query over the exported Rego and data.
type pair struct {
	exported *torego.Bundle
	compiled *engine.Compiled
	query    rego.PreparedEvalQuery
	counts   struct{ calls, tokens []string }
	// answer is the engine's last answer compare read, for tests that
	// count what their cases exercised.
	answer map[string]any
}

// prepare exports b, checks the Rego as `opa check --strict` does and
// prepares data.toolgate.decision once.
func prepare(t testing.TB, b engine.Bundle) (*pair, error) {
	t.Helper()
	out, err := torego.Export(b)
	if err != nil {
		return nil, err
	}
	if err := checkStrict(out); err != nil {
		_ = os.WriteFile("/tmp/regodiff-strict.rego", out.Policy, 0o644)
		t.Fatalf("opa check --strict: %v\n%s", err, out.Policy)
	}
	var doc map[string]any
	if err := json.Unmarshal(out.Data, &doc); err != nil {
		t.Fatal(err)
	}
	q, err := rego.New(
		rego.Query("data.toolgate.decision"),
		rego.Module(torego.PolicyFile, string(out.Policy)),
		rego.Store(inmem.NewFromObject(doc)),
	).PrepareForEval(context.Background())
	if err != nil {
		t.Fatalf("preparing the exported Rego: %v\n%s", err, out.Policy)
	}
	compiled, _ := engine.Compile(b)
	p := &pair{exported: out, compiled: compiled, query: q}
	counts := doc[torego.Root].(map[string]any)["counts"].(map[string]any)
	for _, k := range counts["calls"].([]any) {
		p.counts.calls = append(p.counts.calls, k.(string))
	}
	for _, k := range counts["tokens"].([]any) {
		p.counts.tokens = append(p.counts.tokens, k.(string))
	}
	return p, nil
}

// checkStrict compiles the module as `opa check --strict` does.
func checkStrict(b *torego.Bundle) error {
	m, err := ast.ParseModuleWithOpts(torego.PolicyFile, string(b.Policy), ast.ParserOptions{RegoVersion: ast.RegoV1})
	if err != nil {
		return err
	}
	c := ast.NewCompiler().WithStrict(true)
	c.Compile(map[string]*ast.Module{torego.PolicyFile: m})
	if c.Failed() {
		return c.Errors
	}
	return nil
}

// usage is a deterministic Usage: counts that depend on the key, tool and
// window, so limits hold for some calls and not others.
type usage struct{ seed uint64 }

func mix(parts ...string) uint64 {
	h := uint64(1469598103934665603)
	for _, p := range parts {
		for i := 0; i < len(p); i++ {
			h = (h ^ uint64(p[i])) * 1099511628211
		}
		h = (h ^ 0xff) * 1099511628211
	}
	return h
}

func (u usage) Calls(key engine.UsageKey, tool string, window time.Duration, _ time.Time) int64 {
	return int64(mix(fmt.Sprint(u.seed, key.Session, key.Namespace), key.ID, tool, window.String()) % 6)
}

func (u usage) Tokens(key engine.UsageKey, window time.Duration, _ time.Time) float64 {
	return float64(mix(fmt.Sprint(u.seed, key.Session, key.Namespace), key.ID, window.String()) % 2000)
}

// Shared answers a shared limit by its own counter (limit id, key, tool),
// unlike any local count.
func (u usage) Shared(q engine.SharedQuery) float64 {
	n := mix(fmt.Sprint(u.seed, "shared", q.Key.Session, q.Key.Namespace), q.Limit, q.Key.ID, q.Tool)
	if q.Tokens {
		return float64(n % 2000)
	}
	return float64(n % 6)
}

// compare decides doc (a request) on both sides at now and reports any
// difference; ok=false when the engine refuses the request (then there is
// nothing to compare).
func (p *pair) compare(t testing.TB, doc []byte, now time.Time, u engine.Usage) (bool, error) {
	req, err := engine.DecodeRequest(doc)
	if err != nil {
		return false, nil
	}
	opts := engine.EvalOptions{Now: func() time.Time { return now }, Usage: u}
	if s, ok := u.(engine.SharedUsage); ok {
		opts.Shared = s
	}
	if _, ok := req[engine.FieldOutput]; ok {
		// A request carrying the tool's output is a result evaluation,
		// as the exported Rego reads it (issue 28).
		opts.Phase = engine.PhaseResult
	}
	res := p.compiled.Evaluate(req, opts)
	want, err := res.AppendJSON(nil)
	if err != nil {
		return false, err
	}
	var wantV map[string]any
	if err := json.Unmarshal(want, &wantV); err != nil {
		return false, err
	}
	delete(wantV, "latencyMs")
	// The Rego decides; where a redact decision's spans fall, the output
	// as delivered and the explanations are the engine's alone (see
	// docs/opa.md).
	for _, k := range []string{"redactions", "output", "explanations"} {
		delete(wantV, k)
	}
	// The engine's JSON leaves an ask's timeout to the sidecar (it sets
	// the ApprovalRequest's expiry from it); OPA, which has no
	// ApprovalRequests, states it.
	if res.ApprovalTimeout != 0 {
		wantV["approvalTimeoutSeconds"] = res.ApprovalTimeout.Seconds()
	}
	p.answer = wantV

	input, err := ast.ValueFromReader(bytes.NewReader(doc))
	if err != nil {
		return false, fmt.Errorf("OPA cannot read the request the engine read: %v", err)
	}
	obj := input.(ast.Object)
	obj.Insert(ast.StringTerm("now"), ast.StringTerm(now.Format(time.RFC3339Nano)))
	if u != nil && len(p.counts.calls)+len(p.counts.tokens) > 0 {
		obj.Insert(ast.StringTerm("counts"), ast.NewTerm(countsFor(req, u, now, p.counts.calls, p.counts.tokens)))
	}
	rs, err := p.query.Eval(context.Background(), rego.EvalParsedInput(obj))
	if err != nil {
		return true, fmt.Errorf("OPA: %v", err)
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return true, fmt.Errorf("OPA: decision is undefined for %s", doc)
	}
	got, err := json.Marshal(rs[0].Expressions[0].Value)
	if err != nil {
		return true, err
	}
	var gotV map[string]any
	if err := json.Unmarshal(got, &gotV); err != nil {
		return true, err
	}
	if !reflect.DeepEqual(gotV, wantV) {
		return true, fmt.Errorf("mismatch for request %s at %s\nengine: %s (approval timeout %v)\nOPA:    %s", doc, now.Format(time.RFC3339Nano), want, res.ApprovalTimeout, got)
	}
	return true, nil
}

// countsFor is what a caller of the exported bundle supplies as
// input.counts: for each key the rules read, the count the engine's Usage
// answers for this call (per/window), or its SharedUsage for a shared
// limit (shared/per/LimitID, as the shared store answers the sidecar).
func countsFor(req engine.Request, u engine.Usage, now time.Time, calls, tokens []string) ast.Value {
	agent, session := engine.UsageKeys(req)
	tool, _ := req["tool_name"].(string)
	keyOf := func(per string) engine.UsageKey {
		switch per {
		case engine.PerSession:
			return session
		case engine.PerNamespace:
			return engine.UsageKey{Namespace: true}
		}
		return agent
	}
	count := func(k string, isTokens bool) float64 {
		if rest, ok := strings.CutPrefix(k, torego.SharedCountPrefix); ok {
			per, id, _ := strings.Cut(rest, "/")
			q := engine.SharedQuery{Limit: id, Key: keyOf(per), Tokens: isTokens}
			if !isTokens {
				q.Tool = tool
			}
			return u.(engine.SharedUsage).Shared(q)
		}
		per, window, _ := strings.Cut(k, "/")
		d, err := time.ParseDuration(window)
		if err != nil {
			panic(err)
		}
		if isTokens {
			return u.Tokens(keyOf(per), d, now)
		}
		return float64(u.Calls(keyOf(per), tool, d, now))
	}
	c := ast.NewObject()
	for _, k := range calls {
		c.Insert(ast.StringTerm(k), ast.NumberTerm(json.Number(fmt.Sprint(int64(count(k, false))))))
	}
	tk := ast.NewObject()
	for _, k := range tokens {
		tk.Insert(ast.StringTerm(k), ast.NumberTerm(json.Number(engine.FormatNumber(count(k, true)))))
	}
	return ast.NewObject(ast.Item(ast.StringTerm("calls"), ast.NewTerm(c)), ast.Item(ast.StringTerm("tokens"), ast.NewTerm(tk)))
}
