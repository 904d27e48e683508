package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// The gateway filters of a rule (issue 9, seed 001). Each present key must
// hold. Lists are never empty (MinItems=1): an empty list would read as
// "everyone" to one person and "no one" to another, so it is refused. Every
// size is bounded so the CEL cost estimate stays within the API server's
// budget.

// Subjects scopes a rule to agents or roles: it applies when the request's
// agent_id is listed (compared as FrozenAgents are) or one of its roles is.
// A deny scoped by a missing identity still applies.
// +kubebuilder:validation:MinProperties=1
type Subjects struct {
	// agents are agent ids.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Agents []string `json:"agents,omitempty"`

	// roles are compared exactly with the request's roles.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Roles []string `json:"roles,omitempty"`
}

// Targets binds a rule to what a call touches: AND across kinds, OR within
// one.
// +kubebuilder:validation:MinProperties=1
type Targets struct {
	// servers are MCP servers; a tool inherits its server's rules. A call's
	// server is its server field, or <server> of mcp__<server>__<tool>.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Servers []string `json:"servers,omitempty"`

	// tools are full tool_name values.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Tools []string `json:"tools,omitempty"`

	// resources binds the rule to resources the call lists; in a tiered
	// policy such a rule decides once per resource it is bound to.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	Resources []ResourceTarget `json:"resources,omitempty"`
}

// ResourceTarget names resources of one type.
type ResourceTarget struct {
	// type is compared exactly with a resource's type.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Type string `json:"type"`

	// names are compared exactly with a resource's name.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Names []string `json:"names"`
}

// Select is seed 001's resource selector.
// +kubebuilder:validation:MinProperties=1
type Select struct {
	// action: the request's action (call when absent) is listed.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	Action []string `json:"action,omitempty"`

	// sideEffect: the request's side_effect is listed.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	SideEffect []string `json:"sideEffect,omitempty"`

	// tool is an exact tool_name, or /regex/ (RE2, unanchored like the
	// matches operator).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4098
	Tool string `json:"tool,omitempty"`

	// resourceType is the type of the resource under evaluation (tiered), or
	// of any touched resource (ordered).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ResourceType string `json:"resourceType,omitempty"`

	// context: each key's JSON scalar equals the request's context.<key>,
	// type-aware like eq.
	// +optional
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=32
	Context map[string]apiextensionsv1.JSON `json:"context,omitempty"`
}

// When holds context conditions.
// +kubebuilder:validation:MinProperties=1
type When struct {
	// schedule holds inside any of its windows.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Schedule []Window `json:"schedule,omitempty"`

	// environments: the request's environment is listed.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	Environments []string `json:"environments,omitempty"`

	// sensitivity: the call's tags (and the current resource's) intersect
	// the list.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	Sensitivity []string `json:"sensitivity,omitempty"`

	// actorConfidence: the request's actor_confidence (unknown when absent)
	// is listed.
	// +optional
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	ActorConfidence []string `json:"actorConfidence,omitempty"`

	// rateLimit holds once the calls to this tool already allowed for the
	// key in the trailing window number at least max: a deny or warn with
	// it fires at the ceiling.
	// +optional
	RateLimit *Limit `json:"rateLimit,omitempty"`

	// tokenBudget holds when the tokens already allowed for the key in the
	// window plus this call's tokens exceed max.
	// +optional
	TokenBudget *Limit `json:"tokenBudget,omitempty"`
}

// Day is a weekday, lower case.
// +kubebuilder:validation:Enum=mon;tue;wed;thu;fri;sat;sun
type Day string

// Window is a weekly time window, from (inclusive) to (exclusive). One whose
// to is before its from crosses midnight and belongs to the day it starts.
// +kubebuilder:validation:XValidation:rule="self.from != self.to",message="from and to must differ: the window would be empty (write 00:00 to 23:59 for a whole day)"
type Window struct {
	// days the window starts on; omitted: every day.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=7
	Days []Day `json:"days,omitempty"`

	// from is HH:MM (00:00 to 23:59), inclusive.
	// +required
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9]$`
	// +kubebuilder:validation:MaxLength=5
	From string `json:"from"`

	// to is HH:MM (00:00 to 23:59), exclusive.
	// +required
	// +kubebuilder:validation:Pattern=`^([01][0-9]|2[0-3]):[0-5][0-9]$`
	// +kubebuilder:validation:MaxLength=5
	To string `json:"to"`

	// timeZone is an IANA zone such as Europe/Berlin; omitted: UTC.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	TimeZone string `json:"timeZone,omitempty"`
}

// LimitScope is whose usage a limit counts.
// +kubebuilder:validation:Enum=agent;session;namespace
type LimitScope string

// LimitStore is where a limit is counted.
// +kubebuilder:validation:Enum=local;shared
type LimitStore string

// Limit stores.
const (
	// LimitStoreLocal counts in each sidecar alone (the default): an agent
	// with N replicas may make N times max calls.
	LimitStoreLocal LimitStore = "local"
	// LimitStoreShared counts once across every sidecar of the namespace,
	// in the store the sidecars are given (--usage-store, Redis).
	LimitStoreShared LimitStore = "shared"
)

// Limit is a rate limit (calls to the same tool) or a token budget (tokens
// of all tools) over a trailing window. Counts are per sidecar, that is
// per pod, unless store is shared.
// +kubebuilder:validation:XValidation:rule="!has(self.failOpen) || !self.failOpen || (has(self.store) && self.store == 'shared')",fieldPath=".failOpen",message="failOpen is only for store: shared (a local count never waits on a store)"
type Limit struct {
	// max is the ceiling, at least 1.
	// +required
	// +kubebuilder:validation:Minimum=1
	Max int64 `json:"max"`

	// window is a Go duration (90s, 15m, 24h) or a number of days (7d),
	// from 1s to 31d.
	// +required
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=32
	Window string `json:"window"`

	// per is agent (when omitted), session, or namespace (one count for
	// every agent of the namespace); calls without the id share one
	// bucket, so missing identity never escapes a limit.
	// +optional
	Per LimitScope `json:"per,omitempty"`

	// store is local (when omitted: each sidecar counts alone) or shared
	// (one count across every sidecar of the namespace for the same key,
	// kept in the store given to the sidecars with --usage-store).
	// +optional
	Store LimitStore `json:"store,omitempty"`

	// failOpen, with store shared, lets a call under this limit through
	// uncounted while the store is unreachable, slow or refusing; by
	// default such a call is denied USAGE_UNAVAILABLE. toolgate validate
	// warns about it.
	// +optional
	FailOpen bool `json:"failOpen,omitempty"`
}
