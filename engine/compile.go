package engine

import (
	"cmp"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/toolgate/toolgate/engine/detect"
	"github.com/toolgate/toolgate/engine/internal/fold"
	"github.com/toolgate/toolgate/engine/internal/jsonvalue"
	"github.com/toolgate/toolgate/engine/internal/regex"
	"github.com/toolgate/toolgate/engine/internal/stringset"
	"github.com/toolgate/toolgate/engine/request"
)

// Limits checked at compile time, mirrored by the CRD schema.
const (
	MaxRulesPerPolicy    = 1000
	MaxConditionsPerRule = 64
	MaxValuesPerList     = 1024
	MaxRuleIDLength      = 63
	MaxDescriptionLength = 1024
)

// DefaultBudget is the wall-clock budget of one evaluation.
const DefaultBudget = 50 * time.Millisecond

var ruleIDPattern = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Compiled is an immutable, ready-to-evaluate bundle. It is safe for
// concurrent use; a nil *Compiled has no policies.
type Compiled struct {
	revision string
	identity *Identity // the bundle's registered agents; nil: none
	policies []cpolicy
	// nsStart is where the namespace's level begins in policies: the
	// ClusterPolicies come first (0: none, len: only ClusterPolicies).
	nsStart    int
	exceptions []cexception
	shadows    []shadowPolicy // Audit policies, each compiled alone
	frozen     freezes
	// bundleFrozen are the bundle's own freezes, kept for WithFrozen.
	bundleFrozen []FrozenAgent
	// byTool finds, with one lookup per evaluation, the policies that have
	// rules pinned to a tool and those rules; policies without a hit and
	// without rules for any tool are skipped.
	byTool map[string][]toolHit
	// results are the result views of policies (nil without a result
	// rule), resultByTool their byTool: what a result evaluation scans.
	results        []cpolicy
	resultByTool   map[string][]toolHit
	hasResultRules bool
	textSlot       int32          // output.text's slot, -1 when no rule reads it
	paths          []request.Path // one slot per distinct field path
	usesUsage      bool           // a rule has a rateLimit or tokenBudget
	usesShared     bool           // one of them has store: shared
	usesNamespace  bool           // one of them has per: namespace
	// usageWindow is the longest window of those limits.
	usageWindow time.Duration
	// resourceSlot marks the paths rooted at resource, which read the
	// resource under evaluation in a per-resource evaluation.
	resourceSlot []bool
	scratch      sync.Pool
}

// toolHit is one policy's rules pinned to a tool.
type toolHit struct {
	policy int32
	rules  []int32
}

// frozenEntry is a FrozenAgent whose Reason is filled in.
type frozenEntry struct {
	FrozenAgent
}

// freezes index frozen agents by folded agent id and by service account; a
// freeze naming both is in both.
type freezes struct {
	byAgent          map[string][]frozenEntry
	byServiceAccount map[string][]frozenEntry
	all              []frozenEntry // freezes of every agent
}

func newFreezes(lists ...[]FrozenAgent) freezes {
	var fz freezes
	for _, list := range lists {
		for _, f := range list {
			e := frozenEntry{f}
			if e.Reason == "" {
				e.Reason = f.Describe() + " is frozen"
			}
			if f.All {
				fz.all = append(fz.all, e)
				continue
			}
			// An empty id without a service account is how every bundle
			// before serviceAccount read: it freezes agent_id "".
			if f.ID != "" || f.ServiceAccount == "" {
				if fz.byAgent == nil {
					fz.byAgent = map[string][]frozenEntry{}
				}
				key := fold.Key(f.ID)
				fz.byAgent[key] = append(fz.byAgent[key], e)
			}
			if f.ServiceAccount != "" {
				if fz.byServiceAccount == nil {
					fz.byServiceAccount = map[string][]frozenEntry{}
				}
				fz.byServiceAccount[f.ServiceAccount] = append(fz.byServiceAccount[f.ServiceAccount], e)
			}
		}
	}
	return fz
}

type cpolicy struct {
	id            string
	cluster       bool   // a ClusterPolicy
	kind          string // what results name its level: "" in a one-level bundle
	version       int64
	defaultDeny   bool
	defaultReason string
	compileError  string // non-empty: every evaluation reaching it denies
	tiered        bool
	rules         []crule
	byTool        map[string][]int32 // rules that need tool_name to be the key
	anyTool       []int32            // rules that do not constrain tool_name
	// byResource indexes a tiered policy's rules bound to resources, by
	// type then name; those rules are in neither byTool nor anyTool, since
	// they never take part at tool level.
	byResource map[string]map[string][]int32
	// rank is a tiered policy's evaluation order: rule i is rank[i]-th by
	// priority (descending), effect (deny, warn, audit, allow) and index,
	// so the first match is the decider. byTool, anyTool, byResource and
	// toolLevel (every rule not bound to resources) are sorted by it.
	rank      []int32
	toolLevel []int32
	// skippable: only rules pinned to tools, so a call to another tool
	// cannot reach any rule of this policy.
	skippable bool
	// inPhase are, in a view of a policy with rules of both phases, the
	// rules of the view's phase in spec order (nil: every rule).
	inPhase []int32
}

type crule struct {
	id         string
	exceptions []int32 // indexes in Compiled.exceptions of those exempting from it
	deny       bool
	effect     Effect
	// restrictive is a deny or an ask: missing identity never lifts it.
	restrictive bool
	// sticky: an ask or a redact, which no later allow of an ordered
	// policy replaces.
	sticky bool
	result bool // a result rule (isResultRule)
	// approvalTimeout is an ask rule's wait (DefaultApprovalTimeout unset).
	approvalTimeout time.Duration
	priority        int32
	reason          string // returned when this rule decides
	usesRegex       bool
	conditions      []ccond
	source          *Rule // for explain traces
	// filtered: the rule has subjects, targets, select or when, so it
	// needs more than its conditions checked.
	filtered bool
	subjects *csubjects
	targets  *ctargets
	sel      *cselect
	when     *cwhen
}

type ccond struct {
	slot    int32
	op      op
	value   jsonvalue.Scalar
	members stringset.Set // in/not_in's values, stringified
	matcher *regex.Matcher
	sub     []ccond // the members of an any or all group
	// cast is castToNumber: value.Num, or nums for in and not_in (sorted),
	// hold the value read as a number.
	cast bool
	nums []float64
	// scanner is a detect test's detectors; an opOutput node's one member
	// (sub) is the test it wraps.
	scanner *detect.Scanner
}

// Compile turns a bundle into its evaluable form. It never fails as a whole:
// a policy with problems is kept, marked so that evaluation denies with
// POLICY_COMPILE_ERROR when it reaches it, and each problem is returned as a
// Diagnostic.
func Compile(b Bundle) (*Compiled, []Diagnostic) {
	c := &Compiled{revision: b.Revision, identity: b.Identity, frozen: newFreezes(b.FrozenAgents)}
	c.bundleFrozen = b.FrozenAgents

	policies, shadows, diags := splitShadows(b.Policies, b.Exceptions)
	c.shadows = shadows
	slices.SortStableFunc(policies, comparePolicies)
	k := newCompiler()
	for i := range policies {
		p, d := k.policy(&policies[i])
		c.policies = append(c.policies, p)
		diags = append(diags, d...)
	}
	c.splitPhases()
	c.byTool = indexTools(c.policies)
	if c.results != nil {
		c.resultByTool = indexTools(c.results)
	}
	for pi := range c.policies {
		p := &c.policies[pi]
		for ri := range p.rules {
			if w := p.rules[ri].when; w != nil && (w.rateLimit != nil || w.tokenBudget != nil) {
				c.usesUsage = true
				for i, l := range [2]*climit{w.rateLimit, w.tokenBudget} {
					if l == nil {
						continue
					}
					c.usageWindow = max(c.usageWindow, l.window)
					kind := ""
					if p.cluster {
						kind = KindClusterPolicy
					}
					l.id = LimitID(kind, p.id, p.rules[ri].id, i == 1)
					c.usesShared = c.usesShared || l.shared
					c.usesNamespace = c.usesNamespace || l.namespace
				}
			}
		}
	}
	c.compileLevels(b.Exceptions)
	for i := range c.results {
		c.results[i].kind = c.policies[i].kind
	}
	c.paths = k.paths
	c.textSlot = -1
	if slot, ok := k.slots[FieldOutput+"."+OutputText]; ok {
		c.textSlot = slot
	}
	c.resourceSlot = make([]bool, len(k.paths))
	for i, p := range k.paths {
		c.resourceSlot[i] = p[0].Key == "resource"
	}
	c.initScratch()
	return c, diags
}

// initScratch sizes the pooled per-evaluation scratch to c's field paths.
func (c *Compiled) initScratch() {
	nslots := len(c.paths)
	c.scratch.New = func() any { return newScratch(nslots) }
}

// WithFrozen returns a copy of c that also freezes extra, beside the
// bundle's own frozen agents: the sidecar merges the FrozenAgents it
// watches through the API this way. Only the freeze index is rebuilt; the
// compiled policies are shared, so it costs what the freezes cost. Extra
// freezes do not change Revision. A nil c stays nil: without a bundle
// every decision is deny NO_POLICIES anyway.
func (c *Compiled) WithFrozen(extra []FrozenAgent) *Compiled {
	if c == nil {
		return nil
	}
	out := &Compiled{revision: c.revision, identity: c.identity, policies: c.policies, results: c.results, resultByTool: c.resultByTool, hasResultRules: c.hasResultRules, textSlot: c.textSlot, nsStart: c.nsStart, exceptions: c.exceptions, shadows: c.shadows, byTool: c.byTool, paths: c.paths, resourceSlot: c.resourceSlot, usesUsage: c.usesUsage, usesShared: c.usesShared, usesNamespace: c.usesNamespace, usageWindow: c.usageWindow,
		bundleFrozen: c.bundleFrozen, frozen: newFreezes(c.bundleFrozen, extra)}
	out.initScratch()
	return out
}

// Identity is who the bundle's agents are, nil when they are not
// registered (the sidecar's arguments then say). Callers must not modify
// it.
func (c *Compiled) Identity() *Identity {
	if c == nil {
		return nil
	}
	return c.identity
}

// NextFreezeExpiry is the soonest expiry after now among c's freezes (the
// bundle's and those WithFrozen merged); false when none expires after
// now. Nothing else changes when a freeze ends by itself, so whoever shows
// what a freeze hides (the sidecar's tools/list filter) looks again then.
func (c *Compiled) NextFreezeExpiry(now time.Time) (time.Time, bool) {
	var next time.Time
	found := false
	for _, index := range []map[string][]frozenEntry{c.frozen.byAgent, c.frozen.byServiceAccount, {"": c.frozen.all}} {
		for _, entries := range index {
			for _, e := range entries {
				if e.ExpiresAt != nil && e.ExpiresAt.After(now) && (!found || e.ExpiresAt.Before(next)) {
					next, found = *e.ExpiresAt, true
				}
			}
		}
	}
	return next, found
}

// CheckPolicy returns every reason p would not compile; none means it is
// valid. It is the single validation the webhook and the CLI use.
func CheckPolicy(p Policy) []Diagnostic {
	_, d := newCompiler().policy(&p)
	return d
}

// compiler holds what policies of one bundle share: one slot per distinct
// field path, one matcher per distinct pattern (generated policies repeat
// patterns, and RE2 compilation dominates compile time).
type compiler struct {
	slots    map[string]int32
	paths    []request.Path
	patterns map[string]patternResult
}

type patternResult struct {
	m   *regex.Matcher
	err error
}

func newCompiler() *compiler {
	return &compiler{slots: map[string]int32{}, patterns: map[string]patternResult{}}
}

func (k *compiler) pattern(s string) (*regex.Matcher, error) {
	r, ok := k.patterns[s]
	if !ok {
		r.m, r.err = regex.Compile(s)
		k.patterns[s] = r
	}
	return r.m, r.err
}

func (k *compiler) slot(field string) int32 {
	slot, known := k.slots[field]
	if !known {
		p, _ := request.ParsePath(field) // validated by the caller
		slot = int32(len(k.paths))
		k.paths = append(k.paths, p)
		k.slots[field] = slot
	}
	return slot
}

func (k *compiler) policy(in *Policy) (cpolicy, []Diagnostic) {
	defaulted := in.WithDefaults()
	p := &defaulted
	d := &diagnoser{policy: p.ID}
	if p.Cluster() {
		d.kind = KindClusterPolicy
	}
	out := cpolicy{id: p.ID, version: p.Version, byTool: map[string][]int32{}, tiered: p.Tiered(), cluster: p.Cluster()}
	switch p.Kind {
	case "", KindClusterPolicy:
	default:
		d.policyf(At("kind"), "must be %s or empty (a Policy), not %q", KindClusterPolicy, p.Kind)
	}
	switch p.Mode {
	case "", ModeAudit:
	default:
		d.policyf(At("spec", "mode"), "must be %s or empty (Enforce), not %q", ModeAudit, p.Mode)
	}
	switch p.Evaluation {
	case "", EvaluationOrdered, EvaluationTiered:
	default:
		d.policyf(At("spec", "evaluation"), "must be ordered or tiered, not %q", p.Evaluation)
	}
	switch p.DefaultEffect {
	case "allow":
	case "deny":
		out.defaultDeny = true
		out.defaultReason = DefaultDenyReason(p.ID)
	default:
		d.policyf(At("spec", "defaultEffect"), "must be allow or deny, not %q", p.DefaultEffect)
	}
	if p.ID == "" {
		d.policyf(At("metadata", "name"), "policy has no name")
	}
	switch n := len(p.Rules); {
	case n == 0:
		d.policyf(At("spec", "rules"), "a policy needs at least one rule")
	case n > MaxRulesPerPolicy:
		d.policyf(At("spec", "rules"), "%d rules, more than the limit of %d", n, MaxRulesPerPolicy)
	}
	seen := map[string]int{}
	for ri := range p.Rules {
		r := &p.Rules[ri]
		if first, dup := seen[r.ID]; dup && r.ID != "" {
			d.rulef(ri, r.ID, "id", "duplicate rule id %q (also rule %d)", r.ID, first)
		} else {
			seen[r.ID] = ri
		}
		cr := k.rule(d, ri, r, out.tiered)
		cr.reason = ruleReason(p.ID, r)
		idx := int32(len(out.rules))
		if out.tiered && r.Targets != nil && r.Targets.Resources != nil {
			out.indexResources(idx, r.Targets.Resources)
		} else if keys := toolKeys(r); keys != nil {
			for _, tool := range keys {
				if l := out.byTool[tool]; len(l) == 0 || l[len(l)-1] != idx {
					out.byTool[tool] = append(l, idx)
				}
			}
		} else {
			out.anyTool = append(out.anyTool, idx)
		}
		out.rules = append(out.rules, cr)
	}
	if out.tiered {
		out.rankRules(p.Rules)
	}
	out.compileError = compileErrorOf(p.ID, d.out)
	return out, d.out
}

// rankRules orders a tiered policy's rules as evaluation sees them.
func (p *cpolicy) rankRules(rules []Rule) {
	p.rank = make([]int32, len(rules))
	order := make([]int32, len(rules)) // rule indexes in rank order
	for i, r := range RuleRanks(rules) {
		p.rank[i] = int32(r)
		order[r] = int32(i)
	}
	byRank := func(l []int32) {
		slices.SortFunc(l, func(x, y int32) int { return cmp.Compare(p.rank[x], p.rank[y]) })
	}
	for _, l := range p.byTool {
		byRank(l)
	}
	byRank(p.anyTool)
	for _, names := range p.byResource {
		for _, l := range names {
			byRank(l)
		}
	}
	p.toolLevel = nil
	for _, i := range order {
		if r := p.rules[i].source; r.Targets == nil || r.Targets.Resources == nil {
			p.toolLevel = append(p.toolLevel, i)
		}
	}
}

// indexResources files rule idx under every resource it is bound to.
func (p *cpolicy) indexResources(idx int32, targets []ResourceTarget) {
	if p.byResource == nil {
		p.byResource = map[string]map[string][]int32{}
	}
	for _, t := range targets {
		names := p.byResource[t.Type]
		if names == nil {
			names = map[string][]int32{}
			p.byResource[t.Type] = names
		}
		for _, n := range t.Names {
			if l := names[n]; len(l) == 0 || l[len(l)-1] != idx {
				names[n] = append(l, idx)
			}
		}
	}
}

// ruleReason is what a result decided by r says: its description, or a
// sentence naming it; an allow says nothing.
func ruleReason(policyID string, r *Rule) string {
	if r.Description != "" {
		return r.Description
	}
	switch Effect(r.Effect) {
	case EffectDeny:
		return fmt.Sprintf("denied by rule %q of policy %q", r.ID, policyID)
	case EffectWarn:
		return fmt.Sprintf("warned by rule %q of policy %q", r.ID, policyID)
	case EffectAudit:
		return fmt.Sprintf("audited by rule %q of policy %q", r.ID, policyID)
	case EffectAsk:
		return fmt.Sprintf("approval required by rule %q of policy %q", r.ID, policyID)
	case EffectRedact:
		return fmt.Sprintf("redacted by rule %q of policy %q", r.ID, policyID)
	}
	return ""
}

func (k *compiler) rule(d *diagnoser, ri int, r *Rule, tiered bool) crule {
	cr := crule{id: r.ID, deny: r.Effect == "deny", effect: Effect(r.Effect), priority: r.Priority, source: r}
	cr.restrictive = cr.deny || cr.effect == EffectAsk
	cr.sticky = cr.effect == EffectAsk || cr.effect == EffectRedact
	cr.result = isResultRule(r)
	switch {
	case r.ID == "":
		d.rulef(ri, r.ID, "id", "rule has no id")
	case chars(r.ID) > MaxRuleIDLength:
		d.rulef(ri, r.ID, "id", "rule id is %d characters long, more than %d", chars(r.ID), MaxRuleIDLength)
	case !ruleIDPattern.MatchString(r.ID):
		d.rulef(ri, r.ID, "id", "rule id %q must be lower-case letters, digits and '-', starting and ending with a letter or digit", r.ID)
	}
	if n := chars(r.Description); n > MaxDescriptionLength {
		d.rulef(ri, r.ID, "description", "description is %d characters long, more than %d", n, MaxDescriptionLength)
	}
	switch Effect(r.Effect) {
	case EffectAllow, EffectDeny, EffectWarn, EffectAudit, EffectAsk, EffectRedact:
		checkPhase(d, ri, r)
	default:
		d.rulef(ri, r.ID, "effect", "must be allow, deny, warn, audit, ask or redact, not %q", r.Effect)
	}
	timeout, at, problem := approvalTimeout(r)
	if cr.approvalTimeout = timeout; problem != "" {
		d.add(ri, r.ID, -1, append(ruleAt(ri), at...), "%s", []any{problem})
	}
	if n := len(r.Conditions); n > MaxConditionsPerRule {
		d.rulef(ri, r.ID, "conditions", "%d conditions, more than the limit of %d", n, MaxConditionsPerRule)
	}
	k.gatewayRule(d, ri, r, &cr, tiered)
	for ci := range r.Conditions {
		cond, ok := k.conditionTree(d, ri, r.ID, ci, nil, &r.Conditions[ci], 0)
		if !ok {
			continue
		}
		if cr.result {
			cond = k.outputAware(cond)
		}
		cr.usesRegex = cr.usesRegex || cond.usesRegex()
		cr.conditions = append(cr.conditions, cond)
	}
	return cr
}

// toolKeys returns the tool names a rule can match, when one of its
// conditions pins tool_name to string literals; nil when it may match any
// tool. Evaluation uses it to skip rules for other tools while keeping the
// scan order.
func toolKeys(r *Rule) []string {
	if r.Targets != nil && len(r.Targets.Tools) > 0 {
		return r.Targets.Tools
	}
	for _, c := range r.Conditions {
		if c.Field != FieldToolName || c.CastToNumber {
			continue // a cast eq "5" also matches " 5": no key names every tool it matches
		}
		switch c.Operator {
		case "eq":
			if s, err := jsonvalue.ParseScalar(c.Value); err == nil && s.Kind == jsonvalue.KindString {
				return []string{s.Str}
			}
		case "in":
			raws := c.Values
			if len(c.Value) > 0 {
				raws = []json.RawMessage{c.Value}
			}
			var keys []string
			for _, raw := range raws {
				s, err := jsonvalue.ParseScalar(raw)
				if err != nil {
					return nil
				}
				keys = append(keys, s.Str)
			}
			if len(keys) > 0 {
				return keys
			}
		}
	}
	return nil
}

// chars counts characters as the CRD schema's maxLength does (Unicode code
// points, not bytes), so a limit means the same in the engine and the API
// server.
func chars(s string) int { return utf8.RuneCountInString(s) }
