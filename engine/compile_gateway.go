package engine

import (
	"slices"
	"strings"
	"time"
	_ "time/tzdata" // schedules name zones; the sidecar image has no zoneinfo

	"github.com/toolgate/toolgate/engine/internal/fold"
	"github.com/toolgate/toolgate/engine/internal/jsonvalue"
	"github.com/toolgate/toolgate/engine/internal/regex"
	"github.com/toolgate/toolgate/engine/internal/schedule"
	"github.com/toolgate/toolgate/engine/internal/stringset"
	"github.com/toolgate/toolgate/engine/request"
)

// Limits on the gateway fields, mirrored by the CRD schema.
const (
	MaxBindingValues  = 256 // agents, roles, servers, tools, names, tags per list
	MaxResourceTarget = 64
	MaxScheduleWindow = 16
	MaxContextKeys    = 32
	MaxGroupMembers   = 16
)

// filter names a rule's filters in the order they are checked (and the
// trace reports the first that failed).
type filter uint8

const (
	filterNone filter = iota
	filterSubjects
	filterTargets
	filterSelect
	filterWhen
	filterConditions
)

var filterNames = [...]string{"", "subjects", "targets", "select", "when", "conditions"}

func (f filter) String() string { return filterNames[f] }

// effectRank orders effects for a tiered policy (and between levels):
// deny > ask > redact > warn > audit > allow.
func effectRank(e Effect) int {
	switch e {
	case EffectDeny:
		return 5
	case EffectAsk:
		return 4
	case EffectRedact:
		return 3
	case EffectWarn:
		return 2
	case EffectAudit:
		return 1
	}
	return 0
}

type csubjects struct {
	agents stringset.Set // fold keys
	roles  stringset.Set
}

type ctargets struct {
	servers, tools stringset.Set
	resources      map[string]stringset.Set // type -> names
}

type cselect struct {
	action, sideEffect stringset.Set
	tool               string
	toolMatcher        *regex.Matcher
	resourceType       string
	context            []ctxLiteral
}

type ctxLiteral struct {
	key   string
	value jsonvalue.Scalar
}

type cwhen struct {
	schedule     []schedule.Window
	environments stringset.Set
	sensitivity  stringset.Set
	confidence   stringset.Set
	rateLimit    *climit
	tokenBudget  *climit
}

type climit struct {
	max       int64
	window    time.Duration
	session   bool
	namespace bool
	// shared: counted in the store every sidecar of the namespace shares
	// (EvalOptions.Shared); failOpen lets it through when that is down.
	shared, failOpen bool
	// id is its LimitID, set once its policy is known (Compile).
	id string
}

// gatewayRule compiles a rule's subjects, targets, select and when into cr,
// reporting problems through d.
func (k *compiler) gatewayRule(d *diagnoser, ri int, r *Rule, cr *crule, tiered bool) {
	fail := func(loc Location, format string, args ...any) {
		d.add(ri, r.ID, -1, append(ruleAt(ri), loc...), format, args)
	}
	if r.Priority != 0 && !tiered {
		fail(At("priority"), "priority %d is only meaningful in a tiered policy (spec.evaluation: tiered); an ordered policy scans rules in order", r.Priority)
	}
	if s := r.Subjects; s != nil {
		cs := &csubjects{}
		if s.Agents != nil {
			checkNames(fail, At("subjects", "agents"), s.Agents)
			folded := make([]string, len(s.Agents))
			for i, a := range s.Agents {
				folded[i] = fold.Key(a)
			}
			cs.agents = stringset.New(folded)
		}
		cs.roles = nameSet(fail, At("subjects", "roles"), s.Roles)
		if s.Agents == nil && s.Roles == nil {
			fail(At("subjects"), "subjects needs agents or roles (omit subjects to apply to everyone)")
		}
		cr.subjects = cs
	}
	if t := r.Targets; t != nil {
		ct := &ctargets{}
		ct.servers = nameSet(fail, At("targets", "servers"), t.Servers)
		ct.tools = nameSet(fail, At("targets", "tools"), t.Tools)
		if t.Resources != nil {
			base := At("targets", "resources")
			checkLength(fail, base, len(t.Resources), MaxResourceTarget, "omit it to bind no resource", "resource targets")
			names := map[string][]string{}
			for i, rt := range t.Resources {
				if rt.Type == "" {
					fail(base.Index(i).Child("type"), "resource type is empty")
				}
				checkNames(fail, base.Index(i).Child("names"), rt.Names)
				names[rt.Type] = append(names[rt.Type], rt.Names...)
			}
			ct.resources = make(map[string]stringset.Set, len(names))
			for typ, list := range names {
				ct.resources[typ] = stringset.New(list)
			}
		}
		if t.Servers == nil && t.Tools == nil && t.Resources == nil {
			fail(At("targets"), "targets needs servers, tools or resources (omit targets to apply to every call)")
		}
		cr.targets = ct
	}
	if s := r.Select; s != nil {
		cs := &cselect{resourceType: s.ResourceType, tool: s.Tool}
		cs.action = nameSet(fail, At("select", "action"), s.Action)
		cs.sideEffect = nameSet(fail, At("select", "sideEffect"), s.SideEffect)
		if pat, ok := regexOf(s.Tool); ok {
			m, err := k.pattern(pat)
			if err != nil {
				fail(At("select", "tool"), "pattern %q does not compile: %v", jsonvalue.Truncate(pat, 128), err)
			}
			cs.toolMatcher = m
			cr.usesRegex = true
		}
		if s.Context != nil {
			if len(s.Context) == 0 {
				fail(At("select", "context"), "must not be empty (omit it to select any context)")
			}
			if len(s.Context) > MaxContextKeys {
				fail(At("select", "context"), "%d keys, more than the limit of %d", len(s.Context), MaxContextKeys)
			}
			for _, key := range sortedKeys(s.Context) {
				loc := At("select", "context", key)
				if key == "" || strings.Contains(key, ".") || request.ForbiddenSegment(key) {
					fail(loc, "context key %q must be one non-empty key without '.' (and not __proto__, constructor or prototype)", key)
					continue
				}
				v, err := jsonvalue.ParseScalar(s.Context[key])
				switch {
				case err != nil:
					fail(loc, "not valid JSON: %v", err)
				case !v.IsScalar():
					fail(loc, "must be a string, number or boolean, not %s", v.Kind)
				default:
					cs.context = append(cs.context, ctxLiteral{key: key, value: v})
				}
			}
		}
		if s.Action == nil && s.SideEffect == nil && s.Tool == "" && s.ResourceType == "" && s.Context == nil {
			fail(At("select"), "select needs at least one key (omit select to select every call)")
		}
		cr.sel = cs
	}
	if w := r.When; w != nil {
		cr.when = k.when(fail, w)
	}
	cr.filtered = cr.subjects != nil || cr.targets != nil || cr.sel != nil || cr.when != nil
}

func (k *compiler) when(fail failFunc, w *When) *cwhen {
	cw := &cwhen{}
	if w.Schedule != nil {
		base := At("when", "schedule")
		checkLength(fail, base, len(w.Schedule), MaxScheduleWindow, "omit it for any time", "windows")
		for i := range w.Schedule {
			if win, ok := readWindow(fail, base.Index(i), &w.Schedule[i]); ok {
				cw.schedule = append(cw.schedule, win)
			}
		}
	}
	cw.environments = nameSet(fail, At("when", "environments"), w.Environments)
	cw.sensitivity = nameSet(fail, At("when", "sensitivity"), w.Sensitivity)
	cw.confidence = nameSet(fail, At("when", "actorConfidence"), w.ActorConfidence)
	cw.rateLimit = limit(fail, At("when", "rateLimit"), w.RateLimit)
	cw.tokenBudget = limit(fail, At("when", "tokenBudget"), w.TokenBudget)
	if w.Schedule == nil && w.Environments == nil && w.Sensitivity == nil && w.ActorConfidence == nil &&
		w.RateLimit == nil && w.TokenBudget == nil {
		fail(At("when"), "when needs at least one key (omit when to apply at any time)")
	}
	return cw
}

// readWindow compiles one window of when.schedule.
func readWindow(fail failFunc, at Location, w *Window) (schedule.Window, bool) {
	return schedule.Read(fail, at, w.Days, w.From, w.To, w.TimeZone)
}

func limit(fail failFunc, at Location, l *Limit) *climit {
	if l == nil {
		return nil
	}
	out := &climit{max: l.Max}
	if l.Max < 1 {
		fail(at.Child("max"), "max must be at least 1, not %d", l.Max)
	}
	d, err := ParseWindow(l.Window)
	switch {
	case err != nil:
		fail(at.Child("window"), "%v", err)
	case d < MinLimitWindow:
		fail(at.Child("window"), "window %q is shorter than %v", l.Window, MinLimitWindow)
	case d > MaxLimitWindow:
		fail(at.Child("window"), "window %q is longer than %d days", l.Window, MaxLimitWindowDays)
	}
	out.window = d
	switch l.Per {
	case "", PerAgent:
	case PerSession:
		out.session = true
	case PerNamespace:
		out.namespace = true
	default:
		fail(at.Child("per"), "per must be agent, session or namespace, not %q", l.Per)
	}
	switch l.Store {
	case "", StoreLocal:
	case StoreShared:
		out.shared, out.failOpen = true, l.FailOpen
	default:
		fail(at.Child("store"), "store must be local or shared, not %q", l.Store)
	}
	if l.FailOpen && !out.shared {
		fail(at.Child("failOpen"), "failOpen is only for store: shared (a local count never waits on a store)")
	}
	return out
}

// checkLength reports a list that is present but empty (hint says what to
// write instead) or longer than limit.
func checkLength(fail failFunc, at Location, n, limit int, hint, noun string) {
	switch {
	case n == 0:
		fail(at, "must not be empty (%s)", hint)
	case n > limit:
		fail(at, "%d %s, more than the limit of %d", n, noun, limit)
	}
}

// checkNames checks a list the schema calls a list of names: 1 to
// MaxBindingValues non-empty strings.
func checkNames(fail failFunc, at Location, items []string) {
	checkLength(fail, at, len(items), MaxBindingValues, "omit it instead", "values")
	for i, s := range items {
		if s == "" {
			fail(at.Index(i), "must not be empty")
		}
	}
}

// nameSet checks an optional list of names and returns it as a set; an
// absent list is the empty set, which filters nothing.
func nameSet(fail failFunc, at Location, items []string) stringset.Set {
	if items == nil {
		return stringset.Set{}
	}
	checkNames(fail, at, items)
	return stringset.New(items)
}

// regexOf tells whether select.tool is a /regex/, and returns the pattern.
func regexOf(tool string) (string, bool) {
	if len(tool) >= 2 && tool[0] == '/' && tool[len(tool)-1] == '/' {
		return tool[1 : len(tool)-1], true
	}
	return "", false
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
