package engine

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/toolgate/toolgate/engine/internal/fold"
)

// A policy is evaluated in one of two modes. Ordered is seed 000's scan and
// the default; tiered is seed 001's gateway model, where a policy computes
// one verdict from its rules' priority tiers.
const (
	EvaluationOrdered = "ordered"
	EvaluationTiered  = "tiered"
)

// Bounds of an ask rule's approval.timeout.
const (
	DefaultApprovalTimeout = 5 * time.Minute
	MaxApprovalTimeout     = time.Hour
)

// Subjects scopes a rule to agents (compared as FrozenAgents are) or roles
// (compared exactly); a rule without subjects applies to everyone. Slices
// use omitzero so an empty list survives encoding and is rejected, rather
// than silently meaning "everyone".
type Subjects struct {
	Agents []string `json:"agents,omitzero"`
	Roles  []string `json:"roles,omitzero"`
}

// Targets binds a rule to what a call touches: AND across kinds, OR within
// one.
type Targets struct {
	// Servers are MCP servers; a tool inherits its server's rules.
	Servers []string `json:"servers,omitzero"`
	// Tools are full tool_name values.
	Tools     []string         `json:"tools,omitzero"`
	Resources []ResourceTarget `json:"resources,omitzero"`
}

// ResourceTarget names resources of one type.
type ResourceTarget struct {
	Type  string   `json:"type"`
	Names []string `json:"names,omitzero"`
}

// Select is seed 001's resource selector: every key present must hold.
type Select struct {
	Action     []string `json:"action,omitzero"`
	SideEffect []string `json:"sideEffect,omitzero"`
	// Tool is an exact tool name, or /regex/ (RE2, unanchored like matches).
	Tool         string                     `json:"tool,omitempty"`
	ResourceType string                     `json:"resourceType,omitempty"`
	Context      map[string]json.RawMessage `json:"context,omitzero"`
}

// When holds context conditions: each present key must hold.
type When struct {
	Schedule        []Window `json:"schedule,omitzero"`
	Environments    []string `json:"environments,omitzero"`
	Sensitivity     []string `json:"sensitivity,omitzero"`
	ActorConfidence []string `json:"actorConfidence,omitzero"`
	RateLimit       *Limit   `json:"rateLimit,omitempty"`
	TokenBudget     *Limit   `json:"tokenBudget,omitempty"`
}

// Window is a weekly time window: on Days (none: every day), from From
// (inclusive) to To (exclusive), both HH:MM in TimeZone (none: UTC). A
// window whose To is before its From crosses midnight and belongs to the
// day it starts.
type Window struct {
	Days     []string `json:"days,omitzero"`
	From     string   `json:"from"`
	To       string   `json:"to"`
	TimeZone string   `json:"timeZone,omitempty"`
}

// Limit is a rate limit (calls to the same tool) or a token budget (tokens
// of all tools) over a trailing window, per agent, session or namespace,
// counted by each sidecar alone or shared by every sidecar of a namespace.
type Limit struct {
	Max int64 `json:"max"`
	// Window is a Go duration or a whole number of days ("7d").
	Window string `json:"window"`
	// Per is agent (the default), session or namespace.
	Per string `json:"per,omitempty"`
	// Store is local (the default, written as "") or shared.
	Store string `json:"store,omitempty"`
	// FailOpen (store shared only): an unavailable store lets the call
	// through uncounted instead of denying it USAGE_UNAVAILABLE.
	FailOpen bool `json:"failOpen,omitempty"`
}

// Limit scopes.
const (
	PerAgent     = "agent"
	PerSession   = "session"
	PerNamespace = "namespace"
)

// Limit stores.
const (
	StoreLocal  = "local"
	StoreShared = "shared"
)

// Usage tells how much was already allowed, for rateLimit and tokenBudget.
// The engine never records anything: the caller (the sidecar, or toolgate
// eval replaying a history) records each allowed call and answers here.
type Usage interface {
	// Calls counts calls to tool allowed for key in (now-window, now].
	Calls(key UsageKey, tool string, window time.Duration, now time.Time) int64
	// Tokens sums the tokens of calls allowed for key in (now-window, now].
	Tokens(key UsageKey, window time.Duration, now time.Time) float64
}

// SharedUsage answers the limits whose store is shared: counted once
// across every sidecar of a namespace, in a store only the caller reaches
// (Redis). The engine stays pure and local: the decision core reserves
// this call in every shared counter it may read before evaluating
// (usage.SharedStore.Reserve, one round trip) and answers here from what
// the store returned. Without an EvalOptions.Shared, shared limits read
// EvalOptions.Usage as local ones do (toolgate eval replaying a history).
type SharedUsage interface {
	// Shared is what q's counter held in its window before this call: the
	// calls (rateLimit) or tokens (tokenBudget) already allowed. An
	// implementation that cannot know it answers 0 and makes the decision
	// core deny the call USAGE_UNAVAILABLE unless q.FailOpen.
	Shared(q SharedQuery) float64
}

// SharedQuery names one shared counter and what the call adds to it.
type SharedQuery struct {
	// Limit is the limit's stable name in the bundle (LimitID): its
	// policy's level and name, its rule, and which condition.
	Limit string
	// Key is whose calls it counts (agent, session or namespace).
	Key UsageKey
	// Tool is the tool a rate limit counts; "" for a token budget.
	Tool string
	// Tokens: a tokenBudget (else a rateLimit).
	Tokens bool
	Window time.Duration
	Max    int64
	// Add is what this call adds when allowed: 1 call, or its tokens.
	Add      float64
	FailOpen bool
}

// LimitID is the stable name of a limit in a bundle: level ("" for the
// namespace's Policy, KindClusterPolicy), policy and rule ids, and
// "rateLimit" or "tokenBudget". Shared counters are keyed by it, so a
// limit's count survives bundle revisions as long as its rule keeps its
// id, and two rules never share a count by accident.
func LimitID(kind, policy, rule string, tokens bool) string {
	cond := "rateLimit"
	if tokens {
		cond = "tokenBudget"
	}
	if kind == "" {
		kind = "Policy"
	}
	return kind + "/" + policy + "/" + rule + "/" + cond
}

// UsageKey is whose usage a limit counts: an agent (its id folded as
// FrozenAgents compare), a session, or the whole namespace (Namespace set,
// ID ""). Calls without the id share the bucket with ID "", so missing
// identity never escapes a limit.
type UsageKey struct {
	Session   bool
	Namespace bool
	ID        string
}

// UsageKeys are the keys a call's usage is counted under: its agent (the
// agent_id folded as FrozenAgents compare) and its session (session_id
// exactly). A call without one (or with a non-string one) counts in that
// kind's "" bucket. The sidecar records an allowed call under both, and the
// engine asks under the one a limit names, so both sides key alike.
func UsageKeys(req Request) (agent, session UsageKey) {
	agent.ID, _ = req[FieldAgentID].(string)
	agent.ID = fold.Key(agent.ID)
	session.Session = true
	session.ID, _ = req[FieldSessionID].(string)
	return agent, session
}

// CallTokens is the tokens a call consumes, from its tokens field: a
// number, 0 when absent, not a number, negative or not finite.
func CallTokens(req Request) float64 {
	f, ok := req[FieldTokens].(float64)
	if !ok || !(f > 0) || f > math.MaxFloat64 {
		return 0
	}
	return f
}

// ParseWindow reads a limit's window: Go duration syntax ("90s", "15m",
// "24h") or a whole number of days ("7d").
func ParseWindow(s string) (time.Duration, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok && n != "" && strings.Trim(n, "0123456789") == "" {
		days, err := strconv.Atoi(n)
		if err != nil || days > MaxLimitWindowDays {
			return 0, fmt.Errorf("window %q is longer than %d days", s, MaxLimitWindowDays)
		}
		return time.Duration(days) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("window %q is neither a Go duration (90s, 15m, 24h) nor a number of days (7d)", s)
	}
	return d, nil
}

// Bounds on a limit's window.
const (
	MinLimitWindow     = time.Second
	MaxLimitWindowDays = 31
	MaxLimitWindow     = MaxLimitWindowDays * 24 * time.Hour
)
