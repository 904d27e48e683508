// Package rego exports a namespace's bundle as an OPA bundle: Rego (v1
// syntax) whose data.toolgate.decision is, for every request, the result
// toolgate's engine gives (less latencyMs and trace; an ask adds its rule's
// approval timeout as approvalTimeoutSeconds). Like the engine it is
// pure: it reads an engine.Bundle and writes bytes, and OPA is no
// dependency of it (the differential test in test/regodiff runs OPA).
//
// The generated module has one Rego rule per policy rule, with the policy
// and rule in a comment, and a fixed part (runtime.rego) with the scan and
// the operators. What it cannot carry over it refuses (Export returns an
// error naming the policy, rule and feature) rather than export wrongly.
package rego

import (
	"archive/tar"
	"bytes"
	"cmp"
	"compress/gzip"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/engine/request"
)

// Paths of the bundle's files, relative to its root.
const (
	ManifestFile = ".manifest"
	PolicyFile   = "toolgate/policy.rego"
	DataFile     = "data.json"
)

// Root is the bundle's one root: its rules and data live under data.toolgate.
const Root = "toolgate"

//go:embed runtime.rego
var runtime string

// decisionRule is the query's rule, its last value the exporter's choice:
// _scan for a bundle of one level without exceptions or shadow policies
// (OPA pays for every branch it evaluates, and for every rule it goes
// through), else _shadowed(_decided) (runtime.rego).
const decisionRule = `# ---------------------------------------------------------------------------
# decision is what ` + "`toolgate eval`" + ` prints for input, less latencyMs and trace;
# an ask decision adds the asking rule's approval timeout (approvalTimeoutSeconds).
decision := d if {
	d := _frozen
} else := _shadowed(_result("deny", "deny", null, null, null, null, "NO_POLICIES", "the bundle has no policies", [])) if {
	data.toolgate.policyCount == 0
}%s else := %s

`

// Bundle is an exported OPA bundle: the contents of its files.
type Bundle struct {
	Revision string
	Manifest []byte
	Policy   []byte
	Data     []byte
}

// Files lists the bundle's files in a fixed order: path and contents.
func (b *Bundle) Files() [][2]string {
	return [][2]string{
		{ManifestFile, string(b.Manifest)},
		{PolicyFile, string(b.Policy)},
		{DataFile, string(b.Data)},
	}
}

// WriteDir writes the bundle's files under dir, creating it.
func (b *Bundle) WriteDir(dir string) error {
	for _, f := range b.Files() {
		path := filepath.Join(dir, filepath.FromSlash(f[0]))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(f[1]), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// WriteTar writes the bundle as the gzipped tar OPA's bundle plugin loads,
// signed by s (OPA's .signatures.json, see Signer) unless s is nil. It is
// reproducible: equal bundles (and keys) give equal bytes.
func (b *Bundle) WriteTar(w io.Writer, s Signer) error {
	files := b.Files()
	if s != nil {
		sigs, err := signaturesFile(files, s)
		if err != nil {
			return err
		}
		files = append([][2]string{{SignaturesFile, string(sigs)}}, files...)
	}
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	for _, f := range files {
		hdr := &tar.Header{Name: "/" + f[0], Mode: 0o644, Size: int64(len(f[1])), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0).UTC()}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := io.WriteString(tw, f[1]); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// Tar is WriteTar into memory.
func (b *Bundle) Tar(s Signer) ([]byte, error) {
	var buf bytes.Buffer
	err := b.WriteTar(&buf, s)
	return buf.Bytes(), err
}

// policyData is what the scan reads about one policy (data.toolgate.policies).
type policyData struct {
	ID            string     `json:"id"`
	Version       int64      `json:"version"`
	Tiered        bool       `json:"tiered"`
	DefaultDeny   bool       `json:"defaultDeny"`
	DefaultReason string     `json:"defaultReason"`
	CompileError  string     `json:"compileError"`
	Rules         []ruleData `json:"rules"`
	// Kind is engine.KindClusterPolicy for a ClusterPolicy: what a shadow
	// verdict names (the enforcing levels are told apart by clusterCount).
	Kind string `json:"kind,omitempty"`
	// ResultRules: the policy has a result rule (or one claiming another
	// phase than call): an Audit policy without one lets every result go
	// on, as the engine's shadow evaluation of it does.
	ResultRules bool `json:"resultRules,omitempty"`
}

type ruleData struct {
	ID     string `json:"id"`
	Effect string `json:"effect"`
	Reason string `json:"reason"`
	// ApprovalTimeoutSeconds is an ask rule's approval.timeout: what an ask
	// decision states as approvalTimeoutSeconds. Left out of other rules,
	// so exports without ask are unchanged.
	ApprovalTimeoutSeconds *float64 `json:"approvalTimeoutSeconds,omitempty"`
}

type frozenData struct {
	Reason      string `json:"reason"`
	ExpiresAtNs *int64 `json:"expiresAtNs"`
}

// exceptionData is a PolicyException as the Rego applies it: in force for
// a call whose folded agent_id is one of agents, until expiresAtNs;
// targets are the [policy, rule] indexes it exempts from. policy, cluster
// and rules name what it exempts from for exceptionApplied.
type exceptionData struct {
	Name        string          `json:"name"`
	Policy      string          `json:"policy"`
	Cluster     bool            `json:"cluster"`
	Rules       []string        `json:"rules"`
	Agents      map[string]bool `json:"agents"`
	ExpiresAtNs int64           `json:"expiresAtNs"`
	Targets     [][2]int        `json:"targets"`
}

type countKeys struct {
	Calls  []string `json:"calls"`
	Tokens []string `json:"tokens"`
}

type data struct {
	PolicyCount int          `json:"policyCount"`
	FrozenCount int          `json:"frozenCount"`
	Policies    []policyData `json:"policies"`
	// What the scan needs to know without reading every policy: the
	// policies that do not compile, the tiered ones, and whether any rule
	// warns.
	CompileErrors  []int `json:"compileErrors"`
	TieredPolicies []int `json:"tieredPolicies"`
	Warns          bool  `json:"warns"`
	// Asks is whether any rule (enforcing or Audit) asks or redacts (both
	// stick: _sticky): the scan looks for such a verdict only then, so
	// exports without them are unchanged and cost OPA nothing more.
	Asks bool `json:"asks,omitempty"`
	// Detectors and IBANCountries are what detect.rego reads, in an
	// export with a detect condition (DetectData).
	Detectors     map[string]string `json:"detectors,omitempty"`
	IBANCountries string            `json:"ibanCountries,omitempty"`
	// ResultRules: an enforcing policy has a result rule. Without one,
	// every result goes on (allow), whatever the call rules say.
	ResultRules  bool                    `json:"resultRules,omitempty"`
	FrozenAgents map[string][]frozenData `json:"frozenAgents"`
	// FrozenAll are the freezes of every agent (allAgents); left out
	// when there are none, so exports without one are unchanged.
	FrozenAll []frozenData      `json:"frozenAll,omitempty"`
	Fold      map[string]string `json:"fold"`
	// Counts lists the input.counts keys the rules read.
	Counts countKeys `json:"counts"`
	// What bundles of two levels, with exceptions or shadow policies add;
	// each left out when unused, so other exports are unchanged.
	// ClusterCount is how many of the enforcing policies (the first ones)
	// are ClusterPolicies; Shadows (and ShadowTiered) index the Audit
	// policies, which follow the enforcing ones in policies.
	ClusterCount int             `json:"clusterCount,omitempty"`
	Shadows      []int           `json:"shadows,omitempty"`
	ShadowTiered []int           `json:"shadowTiered,omitempty"`
	Exceptions   []exceptionData `json:"exceptions,omitempty"`
}

// Export turns a bundle into Rego and data. Policies that do not compile are
// exported as such: OPA denies POLICY_COMPILE_ERROR where the scan reaches
// them, as the engine does. The error names what cannot be exported.
func Export(b engine.Bundle) (*Bundle, error) {
	sorted := engine.Bundle{Policies: slices.Clone(b.Policies)}
	sorted.Sort() // evaluation order, the cluster level first
	// The enforcing policies, then the Audit ones (each decided alone).
	order := slices.DeleteFunc(slices.Clone(sorted.Policies), func(p engine.Policy) bool { return p.Audit() })
	enforcing := len(order)
	for _, p := range sorted.Policies {
		if p.Audit() {
			order = append(order, p)
		}
	}
	g := &gen{calls: map[string]bool{}, tokens: map[string]bool{}, heads: map[string]bool{}}
	d := data{Policies: []policyData{}, CompileErrors: []int{}, TieredPolicies: []int{}, FrozenAgents: map[string][]frozenData{}, Fold: map[string]string{}}
	d.Exceptions, g.exempt = exceptions(b.Exceptions, order)
	g.folds = len(d.Exceptions) > 0
	g.phases = slices.ContainsFunc(order, func(p engine.Policy) bool { return slices.ContainsFunc(p.Rules, isResultRule) })
	for pi := range order {
		shadow := pi >= enforcing
		pd, err := g.policy(pi, &order[pi], shadow)
		if err != nil {
			return nil, err
		}
		d.Policies = append(d.Policies, pd)
		for _, r := range pd.Rules {
			d.Asks = d.Asks || r.Effect == string(engine.EffectAsk) || r.Effect == string(engine.EffectRedact)
		}
		switch {
		case shadow:
			d.Shadows = append(d.Shadows, pi)
			if pd.CompileError == "" && pd.Tiered {
				d.ShadowTiered = append(d.ShadowTiered, pi)
			}
			continue
		case pd.CompileError != "":
			d.CompileErrors = append(d.CompileErrors, pi)
		}
		d.ResultRules = d.ResultRules || pd.ResultRules
		switch {
		case pd.CompileError != "":
		case pd.Tiered:
			d.TieredPolicies = append(d.TieredPolicies, pi)
		}
		if order[pi].Cluster() {
			d.ClusterCount++
		}
		for _, r := range pd.Rules {
			d.Warns = d.Warns || r.Effect == string(engine.EffectWarn)
		}
	}
	for _, f := range b.FrozenAgents {
		// Only a freeze naming an agent_id (or every agent) can be decided
		// from the request; one naming a ServiceAccount needs the caller's
		// word for it.
		if f.ID == "" && f.ServiceAccount != "" {
			continue
		}
		e := frozenData{Reason: f.Reason}
		if e.Reason == "" {
			e.Reason = f.Describe() + " is frozen"
		}
		if f.ExpiresAt != nil {
			ns := unixNanoClamped(*f.ExpiresAt)
			e.ExpiresAtNs = &ns
		}
		if f.All {
			d.FrozenAll = append(d.FrozenAll, e)
			continue
		}
		key := engine.FoldKey(f.ID)
		d.FrozenAgents[key] = append(d.FrozenAgents[key], e)
		d.FrozenCount++
		g.folds = true
	}
	if g.folds {
		d.Fold = foldTable()
	}
	d.PolicyCount = enforcing
	if g.detects {
		d.Detectors, d.IBANCountries = detectData()
	}
	d.Counts = countKeys{Calls: sortedSet(g.calls), Tokens: sortedSet(g.tokens)}

	doc, err := json.MarshalIndent(map[string]any{Root: d}, "", " ")
	if err != nil {
		return nil, fmt.Errorf("encoding the data: %w", err)
	}
	manifest, err := json.MarshalIndent(map[string]any{"revision": b.Revision, "roots": []string{Root}, "rego_version": 1}, "", " ")
	if err != nil {
		return nil, fmt.Errorf("encoding the manifest: %w", err)
	}
	var src strings.Builder
	src.WriteString("# Generated by `toolgate export rego`: toolgate's policies as Rego (v1).\n")
	fmt.Fprintf(&src, "# Bundle revision %s. Query data.toolgate.decision with the tool call as input.\n", b.Revision)
	src.WriteString("package toolgate\n\n")
	src.WriteString(g.out.String())
	for _, name := range []string{"deny_hit", "hit", "thit", "rhit", "rbound", "shadow_hit"} {
		if !g.heads[name] {
			fmt.Fprintf(&src, "# no rule adds to %s\n%s := set()\n\n", name, name)
		}
	}
	decided := "_scan"
	if d.ClusterCount > 0 || len(d.Shadows) > 0 || len(d.Exceptions) > 0 {
		decided = "_shadowed(_decided)"
	}
	// A result evaluation of a bundle whose enforcing policies have no
	// result rule lets the result go on, whatever the call rules say.
	results := ""
	if !d.ResultRules {
		results = ` else := _shadowed(_result("allow", "allow", null, null, null, null, null, null, [])) if {
	_result_phase
}`
	}
	fmt.Fprintf(&src, decisionRule, results, decided)
	src.WriteString(runtime)
	if g.detects {
		src.WriteString("\n" + DetectRego)
	}
	return &Bundle{Revision: b.Revision, Manifest: append(manifest, '\n'), Policy: []byte(src.String()), Data: append(doc, '\n')}, nil
}

// exceptions are the exceptions the Rego can apply, in the engine's order
// (by name: exceptionApplied names the first), and the [policy, rule]
// indexes of order (the exported policies) each exempts from. The Rego has
// no caller-vouched ServiceAccount (the engine takes it from its caller,
// never from the request, as for freezes), so it applies an exception by
// its agentIds alone, and leaves out one that names only ServiceAccounts:
// OPA decides as the engine does for a caller that vouches for none.
func exceptions(xs []engine.Exception, order []engine.Policy) ([]exceptionData, map[[2]int]bool) {
	xs = slices.Clone(xs)
	slices.SortStableFunc(xs, func(x, y engine.Exception) int {
		return cmp.Or(cmp.Compare(x.Name, y.Name), cmp.Compare(x.PolicyKind, y.PolicyKind), cmp.Compare(x.Policy, y.Policy))
	})
	var out []exceptionData
	exempt := map[[2]int]bool{}
	for _, x := range xs {
		if len(x.AgentIDs) == 0 {
			continue
		}
		cluster := x.PolicyKind == engine.KindClusterPolicy
		e := exceptionData{Name: x.Name, Policy: x.Policy, Cluster: cluster, Rules: x.RuleIDs, Agents: map[string]bool{},
			ExpiresAtNs: unixNanoClamped(x.ExpiresAt), Targets: [][2]int{}}
		if e.Rules == nil {
			e.Rules = []string{}
		}
		for _, a := range x.AgentIDs {
			e.Agents[engine.FoldKey(a)] = true
		}
		for pi := range order {
			p := &order[pi]
			if p.ID != x.Policy || p.Cluster() != cluster {
				continue
			}
			for ri := range p.Rules {
				if slices.Contains(x.RuleIDs, p.Rules[ri].ID) {
					e.Targets = append(e.Targets, [2]int{pi, ri})
					exempt[[2]int{pi, ri}] = true
				}
			}
		}
		out = append(out, e)
	}
	return out, exempt
}

func unixNanoClamped(t time.Time) int64 {
	switch {
	case t.Before(time.Unix(0, math.MinInt64)):
		return math.MinInt64
	case t.After(time.Unix(0, math.MaxInt64)):
		return math.MaxInt64
	}
	return t.UnixNano()
}

func sortedSet(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var foldOnce = sync.OnceValue(func() map[string]string {
	m := map[string]string{}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if !utf8.ValidRune(r) {
			continue
		}
		s := string(r)
		if k := engine.FoldKey(s); k != s {
			m[s] = k
		}
	}
	return m
})

// foldTable maps every rune that folding changes to its fold key.
func foldTable() map[string]string { return foldOnce() }

// mode is where a rule is checked, as in the engine.
type mode uint8

const (
	modeOrdered mode = iota
	modeTool
	modeResource
)

type gen struct {
	out           strings.Builder
	calls, tokens map[string]bool
	folds         bool            // agents are compared folded
	heads         map[string]bool // hit, thit, rhit, rbound: some rule adds to it
	// exempt are the [policy, rule] some exception exempts from; pi is the
	// policy being written.
	exempt    map[[2]int]bool
	pi        int
	groups    int
	negations int
	detects   bool // a condition uses detect: the export carries detect.rego
	// phases: some rule is a result rule, so every rule states its phase
	// (_result_phase or not); without one, no rule does, and exports are
	// as they were.
	phases bool
	// pending are helper rules of the rule being written, written after it.
	pending strings.Builder
}

// RefusalError is Export's error for what cannot be exported: it names the
// policy and rule.
type RefusalError struct {
	PolicyID, RuleID string
	Reason           string
}

func (e *RefusalError) Error() string {
	return fmt.Sprintf("policy %q rule %q cannot be exported to Rego: %s", e.PolicyID, e.RuleID, e.Reason)
}

// refusal is the error for what cannot be exported.
func refusal(p *engine.Policy, r *engine.Rule, format string, args ...any) error {
	return &RefusalError{PolicyID: p.ID, RuleID: r.ID, Reason: fmt.Sprintf(format, args...)}
}

// policy writes one policy's rules; a shadow (Audit) policy's ordered rules
// add to shadow_hit, which the scan never reads.
func (g *gen) policy(pi int, raw *engine.Policy, shadow bool) (policyData, error) {
	p := raw.WithDefaults()
	g.pi = pi
	pd := policyData{ID: p.ID, Version: p.Version, Tiered: p.Tiered(), Rules: []ruleData{},
		DefaultDeny: p.DefaultEffect == string(engine.Deny), ResultRules: slices.ContainsFunc(p.Rules, isResultRule)}
	if p.Cluster() {
		pd.Kind = engine.KindClusterPolicy
	}
	if pd.DefaultDeny {
		pd.DefaultReason = engine.DefaultDenyReason(p.ID)
	}
	if pd.CompileError = engine.CompileError(*raw); pd.CompileError != "" {
		fmt.Fprintf(&g.out, "# policy %s (priority %d) does not compile: the scan denies where it reaches it.\n\n", quote(p.ID), p.Priority)
		return pd, nil
	}
	kind := "ordered: the first matching deny decides, else the first matching ask, else the last match"
	if pd.Tiered {
		kind = "tiered: the top-ranked match of each evaluation decides"
	}
	what := "policy"
	if p.Cluster() {
		what = "ClusterPolicy"
	}
	if shadow {
		what += " in Audit mode (decided alone, recorded in shadow)"
	}
	fmt.Fprintf(&g.out, "# ---- %s %s (priority %d, %s; default %s)\n\n", what, quote(p.ID), p.Priority, kind, p.DefaultEffect)
	rank := engine.RuleRanks(p.Rules)
	for ri := range p.Rules {
		r := &p.Rules[ri]
		pd.Rules = append(pd.Rules, ruleData{ID: r.ID, Effect: r.Effect, Reason: engine.RuleReason(p.ID, r),
			ApprovalTimeoutSeconds: approvalTimeoutSeconds(r)})
		var err error
		switch {
		case !pd.Tiered && shadow:
			err = g.rule(&p, r, modeOrdered, fmt.Sprintf("shadow_hit contains [%d, %d]", pi, ri), ri, rank[ri], "")
		case !pd.Tiered && engine.Effect(r.Effect) == engine.EffectDeny:
			err = g.rule(&p, r, modeOrdered, fmt.Sprintf("deny_hit contains [%d, %d]", pi, ri), ri, rank[ri], "")
		case !pd.Tiered:
			err = g.rule(&p, r, modeOrdered, fmt.Sprintf("hit contains [%d, %d]", pi, ri), ri, rank[ri], "")
		case r.Targets != nil && r.Targets.Resources != nil:
			err = g.resourceRule(&p, r, pi, ri, rank[ri])
		default:
			err = g.rule(&p, r, modeTool, fmt.Sprintf("thit contains [%d, %d, %d]", pi, rank[ri], ri), ri, rank[ri], "")
		}
		if err != nil {
			return pd, err
		}
	}
	return pd, nil
}

// approvalTimeoutSeconds is an ask rule's approval.timeout in seconds,
// engine.DefaultApprovalTimeout when unset, as the engine's compiler reads
// it (the policy compiled, so the timeout parses); nil for other rules.
// test/regodiff compares it with the engine's Result.ApprovalTimeout.
func approvalTimeoutSeconds(r *engine.Rule) *float64 {
	if engine.Effect(r.Effect) != engine.EffectAsk {
		return nil
	}
	s := engine.ApprovalTimeout(r).Seconds()
	return &s
}

func (g *gen) comment(p *engine.Policy, r *engine.Rule, ri, rank int, tiered bool) {
	fmt.Fprintf(&g.out, "# policy %s rule %d %s: %s", quote(p.ID), ri, quote(r.ID), r.Effect)
	if tiered {
		fmt.Fprintf(&g.out, " (priority %d, rank %d)", r.Priority, rank)
	}
	g.out.WriteString("\n")
}

// rule writes one rule: head, then the filters and conditions of r in mode m.
// prelude opens the body (the resource binding of a per-resource rule).
func (g *gen) rule(p *engine.Policy, r *engine.Rule, m mode, head string, ri, rank int, prelude string) error {
	if m != modeResource {
		g.comment(p, r, ri, rank, m == modeTool)
	}
	body, possible, err := g.body(p, r, m)
	if err != nil {
		return err
	}
	if !possible {
		g.out.WriteString("# (select.resourceType never holds at a tiered policy's tool level: no rule)\n\n")
		g.pending.Reset()
		return nil
	}
	lines := append(splitLines(prelude), body...)
	if g.exempt[[2]int{g.pi, ri}] {
		// An exception in force for the call makes the rule not match.
		lines = append(lines, fmt.Sprintf("not [%d, %d] in _exempt", g.pi, ri))
	}
	if len(lines) == 0 {
		lines = []string{"true"}
	}
	g.heads[strings.Fields(head)[0]] = true
	fmt.Fprintf(&g.out, "%s if {\n", head)
	for _, l := range lines {
		fmt.Fprintf(&g.out, "\t%s\n", l)
	}
	g.out.WriteString("}\n\n")
	g.flush()
	return nil
}

// flush writes the pending helper rules.
func (g *gen) flush() {
	g.out.WriteString(g.pending.String())
	g.pending.Reset()
}

func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// resourceRule writes a tiered policy's rule bound to resources: it is
// evaluated for each resource it names, and makes the resource bound.
func (g *gen) resourceRule(p *engine.Policy, r *engine.Rule, pi, ri, rank int) error {
	g.comment(p, r, ri, rank, true)
	names := map[string][]string{}
	var types []string
	for _, t := range r.Targets.Resources {
		if _, ok := names[t.Type]; !ok {
			types = append(types, t.Type)
		}
		names[t.Type] = append(names[t.Type], t.Names...)
	}
	sort.Strings(types)
	var obj []string
	for _, t := range types {
		obj = append(obj, quote(t)+": "+stringSet(names[t]))
	}
	bind := fmt.Sprintf("some i, r in _resources\n_binds(r, {%s})", strings.Join(obj, ", "))
	var targets []string
	if t := r.Targets; t != nil {
		if t.Servers != nil {
			targets = append(targets, "_server in "+stringSet(t.Servers))
		}
		if t.Tools != nil {
			targets = append(targets, "input.tool_name in "+stringSet(t.Tools))
		}
	}
	if isResultRule(*r) {
		// A result no rule judged goes on: result rules bind no resource
		// to an implicit deny (nor count for a call's).
		return g.rule(p, r, modeResource, fmt.Sprintf("rhit contains [%d, i, %d, %d]", pi, rank, ri), ri, rank, bind)
	}
	g.heads["rbound"] = true
	fmt.Fprintf(&g.out, "rbound contains [%d, i] if {\n", pi)
	for _, l := range append(splitLines(bind), targets...) {
		fmt.Fprintf(&g.out, "\t%s\n", l)
	}
	g.out.WriteString("}\n\n")
	return g.rule(p, r, modeResource, fmt.Sprintf("rhit contains [%d, i, %d, %d]", pi, rank, ri), ri, rank, bind)
}

// body is the expressions of r's filters and conditions in mode m;
// possible=false when a filter can never hold there.
func (g *gen) body(p *engine.Policy, r *engine.Rule, m mode) ([]string, bool, error) {
	var out []string
	switch {
	case !g.phases:
	case isResultRule(*r):
		out = append(out, "_result_phase")
	default:
		out = append(out, "not _result_phase")
	}
	// A deny or an ask also holds when an identity it is scoped by is
	// missing: missing identity never lifts a deny or skips an approval.
	restrictive := engine.Effect(r.Effect) == engine.EffectDeny || engine.Effect(r.Effect) == engine.EffectAsk
	if s := r.Subjects; s != nil {
		folded := make([]string, len(s.Agents))
		for i, a := range s.Agents {
			folded[i] = engine.FoldKey(a)
		}
		if len(folded) > 0 {
			g.folds = true
		}
		out = append(out, fmt.Sprintf("_subjects(%s, %s, %t)", stringSet(folded), stringSet(s.Roles), restrictive))
	}
	if t := r.Targets; t != nil {
		if t.Servers != nil {
			out = append(out, "_server in "+stringSet(t.Servers))
		}
		if t.Tools != nil {
			out = append(out, "input.tool_name in "+stringSet(t.Tools))
		}
		if t.Resources != nil && m == modeOrdered {
			names := map[string][]string{}
			for _, rt := range t.Resources {
				names[rt.Type] = append(names[rt.Type], rt.Names...)
			}
			var obj []string
			for _, typ := range sortedSet(keysOf(names)) {
				obj = append(obj, quote(typ)+": "+stringSet(names[typ]))
			}
			out = append(out, fmt.Sprintf("_touches({%s})", strings.Join(obj, ", ")))
		}
	}
	if s := r.Select; s != nil {
		if s.Action != nil {
			out = append(out, "_action in "+stringSet(s.Action))
		}
		if s.SideEffect != nil {
			out = append(out, "input.side_effect in "+stringSet(s.SideEffect))
		}
		if pat, ok := engine.SelectToolPattern(s.Tool); ok {
			if err := checkPattern(pat); err != nil {
				return nil, false, refusal(p, r, "select.tool %s", err)
			}
			out = append(out, "is_string(input.tool_name)", fmt.Sprintf("regex.match(%s, input.tool_name)", regexLiteral(pat)))
		} else if s.Tool != "" {
			out = append(out, "input.tool_name == "+quote(s.Tool))
		}
		if s.ResourceType != "" {
			switch m {
			case modeTool:
				return nil, false, nil
			case modeResource:
				out = append(out, "r.type == "+quote(s.ResourceType))
			default:
				out = append(out, fmt.Sprintf("_touches_type(%s)", quote(s.ResourceType)))
			}
		}
		for _, key := range sortedSet(keysOf(s.Context)) {
			e, err := equalTo(fmt.Sprintf("_context[%s]", quote(key)), s.Context[key])
			if err != nil {
				return nil, false, refusal(p, r, "select.context %s: %v", key, err)
			}
			out = append(out, e)
		}
	}
	if w := r.When; w != nil {
		if w.Schedule != nil {
			out = append(out, "_in_schedule("+schedule(w.Schedule)+")")
		}
		if w.Environments != nil {
			out = append(out, "input.environment in "+stringSet(w.Environments))
		}
		if w.ActorConfidence != nil {
			out = append(out, "_confidence in "+stringSet(w.ActorConfidence))
		}
		if w.Sensitivity != nil {
			if m == modeResource {
				out = append(out, fmt.Sprintf("_tagged_resource(r, %s)", stringSet(w.Sensitivity)))
			} else {
				out = append(out, fmt.Sprintf("_tagged(%s)", stringSet(w.Sensitivity)))
			}
		}
		if l := w.RateLimit; l != nil {
			key := g.countKey(p, r, l, false, g.calls)
			out = append(out, fmt.Sprintf("_calls(%s) >= %d", quote(key), l.Max))
		}
		if l := w.TokenBudget; l != nil {
			key := g.countKey(p, r, l, true, g.tokens)
			out = append(out, fmt.Sprintf("_tokens(%s) + _call_tokens > %d", quote(key), l.Max))
		}
	}
	for ci := range r.Conditions {
		c := &r.Conditions[ci]
		if c.Any != nil {
			name, err := g.group(p, r, c.Any, m)
			if err != nil {
				return nil, false, err
			}
			out = append(out, name)
			continue
		}
		e, err := g.test(c, m)
		if err != nil {
			return nil, false, refusal(p, r, "condition %d: %v", ci, err)
		}
		out = append(out, e)
	}
	return out, true, nil
}

func keysOf[V any](m map[string]V) map[string]bool {
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}

// countKey is the input.counts key a limit reads: per/window for a local
// limit (every local limit of that scope and window reads the same count,
// as they read the same ledger), shared/per/LimitID for a shared one (each
// shared limit is its own counter in the store, engine.SharedQuery).
func (g *gen) countKey(p *engine.Policy, r *engine.Rule, l *engine.Limit, tokens bool, into map[string]bool) string {
	per := l.Per
	if per == "" {
		per = engine.PerAgent
	}
	var key string
	if l.Store == engine.StoreShared {
		kind := ""
		if p.Kind == engine.KindClusterPolicy {
			kind = engine.KindClusterPolicy
		}
		key = SharedCountPrefix + per + "/" + engine.LimitID(kind, p.ID, r.ID, tokens)
	} else {
		d, _ := engine.ParseWindow(l.Window) // the policy compiled
		key = per + "/" + d.String()
	}
	into[key] = true
	return key
}

// SharedCountPrefix starts the input.counts key of a shared limit:
// shared/<per>/<engine.LimitID>, e.g.
// shared/agent/Policy/payments/pay-cap/rateLimit. Its count is what the
// shared store held for this call's key (and tool, for calls) before it.
const SharedCountPrefix = "shared/"

// schedule writes windows as the runtime's _in_window reads them: days
// (weekday names, as time.weekday gives them), after (the days after them,
// for a window crossing midnight), from and to in seconds of the day, zone.
// Windows are read as the engine compiles them (engine.SpanOf); a policy
// whose windows do not compile is exported as a compile error, never here.
func schedule(ws []engine.Window) string {
	var items []string
	for _, w := range ws {
		span, _ := engine.SpanOf(w)
		var on, after []string
		for _, d := range span.Days {
			on = append(on, d.String())
			after = append(after, ((d + 1) % 7).String())
		}
		items = append(items, fmt.Sprintf("{\"days\": %s, \"after\": %s, \"from\": %d, \"to\": %d, \"zone\": %s}",
			stringSet(on), stringSet(after), span.From, span.To, quote(span.Zone)))
	}
	return "[" + strings.Join(items, ", ") + "]"
}

// group writes an any group as a helper rule (a function of the resource
// in a per-resource evaluation), one definition per member, and returns
// the expression that calls it.
func (g *gen) group(p *engine.Policy, r *engine.Rule, members []engine.Condition, m mode) (string, error) {
	g.groups++
	name := fmt.Sprintf("_any_%d", g.groups)
	call, head := name, name
	if readsResource(members, m) {
		call, head = name+"(r)", name+"(r)"
	}
	var defs strings.Builder
	for _, member := range members {
		tests := []engine.Condition{member}
		if member.All != nil {
			tests = member.All
		}
		h := head
		if head != name && !readsResource(tests, m) {
			h = name + "(_)"
		}
		fmt.Fprintf(&defs, "%s if {\n", h)
		for i := range tests {
			e, err := g.test(&tests[i], m)
			if err != nil {
				return "", refusal(p, r, "any group: %v", err)
			}
			fmt.Fprintf(&defs, "\t%s\n", e)
		}
		defs.WriteString("}\n\n")
	}
	fmt.Fprintf(&g.out, "# an any group of rule %s: one definition per member\n", quote(r.ID))
	g.out.WriteString(defs.String())
	return call, nil
}

// isResultRule tells whether r runs in result evaluations: phase result,
// or another phase than call (then its policy does not compile, and a
// result evaluation must reach it to deny), as the engine splits them.
func isResultRule(r engine.Rule) bool { return r.Phase != "" && r.Phase != engine.PhaseCall }

// readsResource tells whether conditions read the resource under
// evaluation (r): paths rooted at resource, in a per-resource evaluation.
func readsResource(conds []engine.Condition, m mode) bool {
	if m != modeResource {
		return false
	}
	for i := range conds {
		c := &conds[i]
		if readsResource(c.All, m) || readsResource(c.Any, m) {
			return true
		}
		if c.Field == "resource" || strings.HasPrefix(c.Field, "resource.") {
			return true
		}
	}
	return false
}

// test is the Rego expression of one condition. A negated operator is
// `not` of a helper rule holding its opposite: OPA evaluates the fields a
// call reads before the call, outside the `not`, so `not f(input.missing)`
// would be undefined where the engine's condition holds.
func (g *gen) test(c *engine.Condition, m mode) (string, error) {
	g.detects = g.detects || c.Operator == "detect"
	e, negated, err := test(c, m)
	if err != nil || !negated {
		return e, err
	}
	g.negations++
	name := fmt.Sprintf("_not_%d", g.negations)
	if readsResource([]engine.Condition{*c}, m) {
		name += "(r)"
	}
	fmt.Fprintf(&g.pending, "%s if %s\n\n", name, e)
	return "not " + name, nil
}

// test is the Rego expression of one condition: it holds exactly when the
// engine's condition holds, missing fields included (a negated operator
// holds on a missing field because `not` of an undefined call is true).
func test(c *engine.Condition, m mode) (string, bool, error) {
	if c.CastToNumber {
		e, err := castTest(c, m)
		return e, false, err
	}
	e, err := positive(c, m)
	switch c.Operator {
	case "neq", "not_in", "not_contains", "not_exists", "is_empty":
		return e, true, err
	}
	return e, false, err
}

// positive is the expression of the condition, or for a negated operator
// (neq, not_in, not_contains, not_exists, is_empty) of its opposite.
func positive(c *engine.Condition, m mode) (string, error) {
	path, err := request.ParsePath(c.Field)
	if err != nil {
		return "", err
	}
	f := field(path, m)
	str := "_str(" + f + ")"
	switch c.Operator {
	case "eq":
		return equalTo(f, c.Value)
	case "neq":
		return equalTo(f, c.Value)
	case "in", "not_in":
		raws := c.Values
		if len(c.Value) > 0 {
			raws = []json.RawMessage{c.Value}
		}
		members := make([]string, 0, len(raws))
		for _, raw := range raws {
			var v any
			if err := json.Unmarshal(raw, &v); err != nil {
				return "", err
			}
			members = append(members, engine.Stringify(v))
		}
		return str + " in " + stringSet(members), nil
	case "contains", "not_contains", "starts_with", "ends_with", "matches":
		var lit string
		if err := json.Unmarshal(c.Value, &lit); err != nil {
			return "", err
		}
		switch c.Operator {
		case "contains":
			return fmt.Sprintf("contains(%s, %s)", str, quote(lit)), nil
		case "not_contains":
			return fmt.Sprintf("contains(%s, %s)", str, quote(lit)), nil
		case "starts_with":
			return fmt.Sprintf("startswith(%s, %s)", str, quote(lit)), nil
		case "ends_with":
			return fmt.Sprintf("endswith(%s, %s)", str, quote(lit)), nil
		}
		if err := checkPattern(lit); err != nil {
			return "", fmt.Errorf("matches %w", err)
		}
		return fmt.Sprintf("regex.match(%s, %s)", regexLiteral(lit), str), nil
	case "gt", "gte", "lt", "lte":
		var n float64
		if err := json.Unmarshal(c.Value, &n); err != nil {
			return "", err
		}
		op := map[string]string{"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}[c.Operator]
		return fmt.Sprintf("_number(%s) %s %s", f, op, number(n)), nil
	case "exists", "not_exists":
		return "_present(" + f + ")", nil
	case "is_empty", "is_not_empty":
		return "_non_empty(" + f + ")", nil
	case "is_valid_json":
		return "_valid_json(" + f + ")", nil
	case "detect":
		raws := c.Values
		if len(c.Value) > 0 {
			raws = []json.RawMessage{c.Value}
		}
		names := make([]string, 0, len(raws))
		for _, raw := range raws {
			var name string
			if err := json.Unmarshal(raw, &name); err != nil {
				return "", fmt.Errorf("detect: %w", err)
			}
			names = append(names, quote(name))
		}
		return fmt.Sprintf("_detect(%s, [%s])", str, strings.Join(names, ", ")), nil
	}
	return "", fmt.Errorf("unknown operator %q", c.Operator)
}

// castTest is the expression of a castToNumber condition: _cast is
// undefined for a field that is no number, so every operator is false
// there, neq and not_in included, as in the engine.
func castTest(c *engine.Condition, m mode) (string, error) {
	path, err := request.ParsePath(c.Field)
	if err != nil {
		return "", err
	}
	f := "_cast(" + field(path, m) + ")"
	read := func(raw json.RawMessage) (string, error) {
		n, ok := engine.CastOperand(raw)
		if !ok {
			return "", fmt.Errorf("castToNumber: value %s is not a number", raw)
		}
		return number(n), nil
	}
	switch c.Operator {
	case "in", "not_in":
		raws := c.Values
		if len(c.Value) > 0 {
			raws = []json.RawMessage{c.Value}
		}
		ns := make([]string, 0, len(raws))
		for _, raw := range raws {
			n, err := read(raw)
			if err != nil {
				return "", err
			}
			ns = append(ns, n)
		}
		return fmt.Sprintf("_cast_%s(%s, [%s])", c.Operator, f, strings.Join(ns, ", ")), nil
	case "eq", "neq", "gt", "gte", "lt", "lte":
		n, err := read(c.Value)
		if err != nil {
			return "", err
		}
		op := map[string]string{"eq": "==", "neq": "!=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}[c.Operator]
		return fmt.Sprintf("%s %s %s", f, op, n), nil
	}
	return "", fmt.Errorf("castToNumber on operator %q", c.Operator)
}

// equalTo is eq's strict, type-aware equality with a scalar literal.
func equalTo(f string, raw json.RawMessage) (string, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	switch x := v.(type) {
	case string:
		return f + " == " + quote(x), nil
	case float64:
		return fmt.Sprintf("_eq_num(%s, %s)", f, number(x)), nil
	case bool:
		return fmt.Sprintf("%s == %t", f, x), nil
	}
	return "", fmt.Errorf("not a string, number or boolean")
}

// number writes a float64 as a Rego number: its shortest decimal, which OPA
// compares exactly.
func number(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

// field is the Rego expression of a field path: a ref where every step is
// a key, _at for a decimal step (an object's key or an array's index) and
// _key after one. In a per-resource evaluation a path rooted at resource
// reads the resource under evaluation (r).
func field(path request.Path, m mode) string {
	cur := "input"
	if m == modeResource && path[0].Key == "resource" {
		cur, path = "r", path[1:]
	}
	plain := true
	for _, s := range path {
		switch {
		case s.Index >= 0:
			cur = fmt.Sprintf("_at(%s, %s, %d)", cur, quote(s.Key), s.Index)
			plain = false
		case !plain:
			cur = fmt.Sprintf("_key(%s, %s)", cur, quote(s.Key))
		case isIdent(s.Key):
			cur += "." + s.Key
		default:
			cur += "[" + quote(s.Key) + "]"
		}
	}
	return cur
}

var keywords = map[string]bool{"as": true, "default": true, "else": true, "false": true, "import": true, "package": true,
	"not": true, "null": true, "true": true, "with": true, "some": true, "in": true, "every": true, "contains": true, "if": true}

func isIdent(s string) bool {
	if s == "" || keywords[s] {
		return false
	}
	for i, c := range s {
		if c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9') {
			continue
		}
		return false
	}
	return true
}

// quote writes s as a Rego string literal (a JSON string).
func quote(s string) string {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(buf.String(), "\n")
}

// stringSet writes a Rego set of strings, sorted and without repeats.
func stringSet(items []string) string {
	if len(items) == 0 {
		return "set()"
	}
	seen := map[string]bool{}
	var out []string
	for _, s := range items {
		if !seen[s] {
			seen[s] = true
			out = append(out, quote(s))
		}
	}
	sort.Strings(out)
	return "{" + strings.Join(out, ", ") + "}"
}

// regexLiteral writes a pattern as a raw string when it can be one.
func regexLiteral(p string) string {
	if !strings.ContainsAny(p, "`\n\r") {
		return "`" + p + "`"
	}
	return quote(p)
}

// checkPattern refuses a pattern whose meaning could differ between the
// engine's RE2 (go-re2) and OPA's regex.match (Go's regexp): \C (any byte,
// which Go does not know), \p and \P (Unicode classes, whose tables follow
// each library's Unicode version) and any character outside ASCII (case
// folding and classes of non-ASCII text follow those tables too). The rest,
// ASCII RE2 syntax, means the same in both.
func checkPattern(p string) error {
	for i := 0; i < len(p); i++ {
		if p[i] >= utf8.RuneSelf {
			return fmt.Errorf("pattern %s has a character outside ASCII: exported patterns are ASCII RE2 syntax", quote(p))
		}
		if p[i] == '\\' && i+1 < len(p) {
			switch p[i+1] {
			case 'C', 'p', 'P':
				return fmt.Errorf("pattern %s uses \\%c, whose meaning differs between RE2 and Go's regexp", quote(p), p[i+1])
			}
			i++
		}
	}
	return nil
}
