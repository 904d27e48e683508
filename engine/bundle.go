package engine

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"
)

// SchemaVersion is the newest version of the bundle document this engine
// reads. A bundle is written with the lowest version that holds it: 1 when
// it uses nothing of the gateway model (so sidecars not yet upgraded keep
// serving it during a rolling upgrade), 2 when it does. A sidecar rejects
// a version it does not know rather than guessing at its meaning.
const SchemaVersion = SchemaVersionSharedLimits

// SchemaVersionSharedLimits is the version of bundles with a limit that
// is shared (store: shared), per namespace, or failOpen (issue 30). A
// sidecar too old to know them refuses the bundle (and keeps serving its
// last one) rather than count alone what every replica should count
// together: five replicas would allow five times the limit.
const SchemaVersionSharedLimits = 7

// SchemaVersionResults is the version of bundles that use issue 28's
// additions: result rules, detect, pinned tools, castToNumber. A sidecar
// too old to know them refuses the bundle (and keeps serving its last one)
// rather than reading a condition it would evaluate differently.
const SchemaVersionResults = 6

// SchemaVersionAsk is the version of bundles with an ask rule: a sidecar
// too old to hold a call for approval refuses the bundle (and keeps
// serving its last one) rather than failing every call on an effect it
// does not know.
const SchemaVersionAsk = 5

// SchemaVersionIdentity is the version of bundles that use registered
// agents or a freeze of every agent, and nothing of SchemaVersionLevels.
const SchemaVersionIdentity = 3

// SchemaVersionGateway is the version of bundles that use the gateway
// model (tiered evaluation, subjects, targets, ...) but neither registered
// agents nor a freeze of every agent.
const SchemaVersionGateway = 2

// SchemaVersionOrdered is the version of bundles that use only seed 000's
// ordered model: every bundle written before the gateway model.
const SchemaVersionOrdered = 1

// NeededSchemaVersion is the lowest version that holds b: what Encode
// writes and Decode insists on.
// A sidecar too old to know registered agents or a freeze of every agent
// refuses a version 3 bundle (and keeps serving its last one) rather than
// ignoring who its agent is or that it is frozen.
func (b *Bundle) NeededSchemaVersion() int {
	if b.usesSharedLimits() {
		return SchemaVersionSharedLimits
	}
	if b.usesResults() {
		return SchemaVersionResults
	}
	if b.usesAsk() {
		return SchemaVersionAsk
	}
	if b.usesLevels() {
		return SchemaVersionLevels
	}
	if b.Identity != nil || slices.ContainsFunc(b.FrozenAgents, func(f FrozenAgent) bool { return f.All }) {
		return SchemaVersionIdentity
	}
	for i := range b.Policies {
		if b.Policies[i].usesGateway() {
			return SchemaVersionGateway
		}
	}
	return SchemaVersionOrdered
}

// usesAsk tells whether b needs SchemaVersionAsk.
func (b *Bundle) usesAsk() bool {
	return slices.ContainsFunc(b.Policies, func(p Policy) bool {
		return slices.ContainsFunc(p.Rules, func(r Rule) bool { return Effect(r.Effect) == EffectAsk || r.Approval != nil })
	})
}

// usesSharedLimits tells whether b needs SchemaVersionSharedLimits.
func (b *Bundle) usesSharedLimits() bool {
	return slices.ContainsFunc(b.Policies, func(p Policy) bool {
		return slices.ContainsFunc(p.Rules, func(r Rule) bool {
			return r.When != nil && (r.When.RateLimit.sharedOrPerNamespace() || r.When.TokenBudget.sharedOrPerNamespace())
		})
	})
}

// sharedOrPerNamespace tells whether l (nil: none) uses a field of
// SchemaVersionSharedLimits. store: local written out counts too: an older
// sidecar would refuse the unknown field anyway, and the version says why.
func (l *Limit) sharedOrPerNamespace() bool {
	return l != nil && (l.Store != "" || l.Per == PerNamespace || l.FailOpen)
}

// usesResults tells whether b needs SchemaVersionResults: each of issue
// 28's additions extends it.
func (b *Bundle) usesResults() bool {
	return len(b.Pins) > 0 || slices.ContainsFunc(b.Policies, func(p Policy) bool {
		return slices.ContainsFunc(p.Rules, func(r Rule) bool {
			return r.usesResults() || slices.ContainsFunc(r.Conditions, Condition.castsToNumber)
		})
	})
}

// castsToNumber tells whether c or a member of its groups has
// castToNumber.
func (c Condition) castsToNumber() bool {
	return c.CastToNumber || slices.ContainsFunc(c.Any, Condition.castsToNumber) || slices.ContainsFunc(c.All, Condition.castsToNumber)
}

// usesGateway tells whether p needs version 2 to be read as written.
func (p *Policy) usesGateway() bool {
	if p.Evaluation != "" {
		return true
	}
	for i := range p.Rules {
		r := &p.Rules[i]
		if r.Priority != 0 || r.Subjects != nil || r.Targets != nil || r.Select != nil || r.When != nil {
			return true
		}
		if e := Effect(r.Effect); e == EffectWarn || e == EffectAudit {
			return true
		}
		for j := range r.Conditions {
			if c := &r.Conditions[j]; c.Any != nil || c.All != nil {
				return true
			}
		}
	}
	return false
}

// Bundle is everything one namespace's sidecars need to decide: its policies
// and frozen agents, and who its agents are once they are registered. It
// is also the wire format published in the bundle ConfigMap (key
// bundle.json).
type Bundle struct {
	SchemaVersion int           `json:"schemaVersion"`
	Revision      string        `json:"revision,omitempty"`
	Policies      []Policy      `json:"policies"`
	FrozenAgents  []FrozenAgent `json:"frozenAgents"`
	// Identity is set when the namespace's agents are registered (see
	// Identity); nil keeps each sidecar's own arguments.
	Identity *Identity `json:"identity,omitempty"`
	// Exceptions are the namespace's PolicyExceptions in force when the
	// bundle was built; evaluation drops each at its expiresAt.
	Exceptions []Exception `json:"exceptions,omitempty"`
	// NamespaceLabels are the namespace's labels when the bundle was built:
	// what a sidecar matches ClusterFrozenAgents' selectors against, so the
	// cluster's kill switch needs neither the operator nor a read of the
	// Namespace. Signed with the rest: a namespace editor cannot change
	// them.
	NamespaceLabels map[string]string `json:"namespaceLabels,omitempty"`
	// Pins are the pinned tool definitions of the namespace's
	// MCPUpstreams (pins.go), whether or not its agents are registered.
	Pins []UpstreamPins `json:"pins,omitempty"`
}

// Policy is one Policy resource as the engine sees it.
type Policy struct {
	// ID is the Policy's metadata.name.
	ID string `json:"id"`
	// Version is the Policy's metadata.generation.
	Version       int64  `json:"version"`
	Priority      int32  `json:"priority"`
	DefaultEffect string `json:"defaultEffect"`
	// Evaluation is ordered (the default, written as "") or tiered.
	Evaluation string `json:"evaluation,omitempty"`
	// Kind is KindClusterPolicy for a ClusterPolicy, "" for the
	// namespace's own Policy: the level the policy decides at.
	Kind string `json:"kind,omitempty"`
	// Mode is ModeAudit for a shadow policy, "" for an enforcing one.
	Mode  string `json:"mode,omitempty"`
	Rules []Rule `json:"rules"`
}

// WithDefaults returns p with its omitted fields as the engine reads them:
// version 0 is 1 (a manifest not yet applied has no generation) and an empty
// defaultEffect is allow for an ordered policy and deny for a tiered one
// (seed 001: zero matches is an implicit deny). Compile and the bundle
// builder both call it, so a published bundle states what evaluation
// assumes. Evaluation stays as written: "" is ordered, and writing it out
// would change the revision of every bundle published before it existed.
func (p Policy) WithDefaults() Policy {
	if p.Version == 0 {
		p.Version = 1
	}
	if p.DefaultEffect == "" {
		p.DefaultEffect = string(Allow)
		if p.Evaluation == EvaluationTiered {
			p.DefaultEffect = string(Deny)
		}
	}
	return p
}

// Tiered reports whether p is evaluated in tiers.
func (p *Policy) Tiered() bool { return p.Evaluation == EvaluationTiered }

// Rule is a set of filters (subjects, targets, select, when, conditions)
// and the effect when all hold. A rule with none of them matches every call.
type Rule struct {
	ID          string `json:"id"`
	Description string `json:"description,omitempty"`
	// Priority is the rule's tier in a tiered policy; ordered policies
	// leave it 0.
	Priority int32 `json:"priority,omitempty"`
	// Phase is when the rule runs: "" (written for call, so bundles without
	// result rules keep their bytes) or PhaseResult.
	Phase      Phase       `json:"phase,omitempty"`
	Effect     string      `json:"effect"`
	Subjects   *Subjects   `json:"subjects,omitempty"`
	Targets    *Targets    `json:"targets,omitempty"`
	Select     *Select     `json:"select,omitempty"`
	When       *When       `json:"when,omitempty"`
	Conditions []Condition `json:"conditions,omitempty"`
	// Approval is an ask rule's: how long its calls wait for a person.
	Approval *RuleApproval `json:"approval,omitempty"`
}

// RuleApproval is how long an ask rule's call waits for a decision.
type RuleApproval struct {
	// Timeout is a Go duration, at most MaxApprovalTimeout;
	// DefaultApprovalTimeout when empty.
	Timeout string `json:"timeout,omitempty"`
}

// Condition tests one request field (Field, Operator, Value or Values), or
// is a group: Any holds when one of its members does, each a test or an All
// group; All holds when every one of its tests does. Nesting stops there.
// Value and Values hold raw JSON so the engine, not a decoder, decides what
// a well-typed value is.
type Condition struct {
	Field    string            `json:"field,omitempty"`
	Operator string            `json:"operator,omitempty"`
	Value    json.RawMessage   `json:"value,omitempty"`
	Values   []json.RawMessage `json:"values,omitempty"`
	Any      []Condition       `json:"any,omitzero"`
	All      []Condition       `json:"all,omitzero"`
	// CastToNumber reads the field, and Value or each of Values, as
	// numbers before comparing (eq, neq, in, not_in, gt, gte, lt, lte):
	// see jsonvalue.CastNumber.
	CastToNumber bool `json:"castToNumber,omitempty"`
}

// FrozenAgent denies everything to one agent until it expires. It names the
// agent by ID (its agent_id, compared as SameAgent does), by ServiceAccount
// (every sidecar running as that ServiceAccount in the namespace, whatever
// agent_id it decides for), or both: either one matching freezes.
type FrozenAgent struct {
	ID string `json:"id"`
	// All freezes every agent of the namespace, whatever its id or
	// ServiceAccount (FrozenAgent spec.allAgents).
	All bool `json:"allAgents,omitempty"`
	// ServiceAccount is compared exactly (it is a DNS label) with the
	// ServiceAccount the caller vouches for in EvalOptions, never with a
	// request field. Empty in bundles written before it existed, and
	// omitted then, so their documents and revisions are unchanged.
	ServiceAccount string     `json:"serviceAccount,omitempty"`
	Reason         string     `json:"reason,omitempty"`
	ExpiresAt      *time.Time `json:"expiresAt,omitempty"`
}

// Describe names what the freeze stops, for its default reason and for
// messages: the agent id, the ServiceAccount, or both.
func (f FrozenAgent) Describe() string {
	switch {
	case f.All:
		return "every agent of the namespace"
	case f.ServiceAccount == "":
		return fmt.Sprintf("agent %q", f.ID)
	case f.ID == "":
		return fmt.Sprintf("service account %q", f.ServiceAccount)
	default:
		return fmt.Sprintf("agent %q and service account %q", f.ID, f.ServiceAccount)
	}
}

// FreezesServiceAccount tells whether f freezes the sidecars running as
// serviceAccount: the comparison evaluation makes (exact: a ServiceAccount
// name is a lowercase DNS subdomain, and an empty one is never matched),
// for tools that find or lift freezes outside an evaluation.
func (f FrozenAgent) FreezesServiceAccount(serviceAccount string) bool {
	return f.ServiceAccount != "" && f.ServiceAccount == serviceAccount
}

// Expired reports whether the freeze has ended at now. A freeze ends at its
// expiresAt (an explicit zero time has long passed); one without never ends.
// This is the one rule evaluation, the bundle builder and the operator's
// status use.
func (f FrozenAgent) Expired(now time.Time) bool {
	return f.ExpiresAt != nil && !now.Before(*f.ExpiresAt)
}

// Sort puts policies in evaluation order (priority descending, then id
// ascending) and frozen agents by id, so that equal inputs encode equally.
func (b *Bundle) Sort() {
	slices.SortStableFunc(b.Policies, comparePolicies)
	slices.SortStableFunc(b.FrozenAgents, func(x, y FrozenAgent) int {
		if c := cmp.Compare(x.ID, y.ID); c != 0 {
			return c
		}
		if c := cmp.Compare(x.ServiceAccount, y.ServiceAccount); c != 0 {
			return c
		}
		if x.All != y.All {
			if x.All {
				return 1
			}
			return -1
		}
		if c := cmp.Compare(expiryKey(x.ExpiresAt), expiryKey(y.ExpiresAt)); c != 0 {
			return c
		}
		return cmp.Compare(x.Reason, y.Reason)
	})
}

func comparePolicies(x, y Policy) int {
	if c := compareLevel(&x, &y); c != 0 {
		return c
	}
	if c := cmp.Compare(y.Priority, x.Priority); c != 0 {
		return c
	}
	return cmp.Compare(x.ID, y.ID)
}

func expiryKey(t *time.Time) int64 {
	if t == nil {
		return 1<<63 - 1
	}
	return t.UnixNano()
}

// Encode returns the canonical bundle document and its revision: the sha256 of
// the document with an empty revision. Equal bundles give byte-identical
// output, so a publisher can skip writes when nothing changed.
func Encode(b Bundle) ([]byte, string, error) {
	b.SchemaVersion = b.NeededSchemaVersion()
	b.Policies = slices.Clone(b.Policies)
	b.FrozenAgents = slices.Clone(b.FrozenAgents)
	for i, f := range b.FrozenAgents {
		if f.ExpiresAt != nil {
			t := f.ExpiresAt.UTC()
			b.FrozenAgents[i].ExpiresAt = &t
		}
	}
	if b.Policies == nil {
		b.Policies = []Policy{}
	}
	if b.FrozenAgents == nil {
		b.FrozenAgents = []FrozenAgent{}
	}
	b.Exceptions = slices.Clone(b.Exceptions)
	for i := range b.Exceptions {
		b.Exceptions[i].ExpiresAt = b.Exceptions[i].ExpiresAt.UTC()
	}
	sortExceptions(b.Exceptions)
	if b.Identity != nil {
		id := b.Identity.sorted()
		b.Identity = &id
	}
	b.Pins = sortedPins(b.Pins)
	b.Sort()
	b.Revision = ""
	content, err := json.Marshal(b)
	if err != nil {
		return nil, "", fmt.Errorf("encoding bundle: %w", err)
	}
	b.Revision = revisionOf(content)
	doc, err := json.Marshal(b)
	if err != nil {
		return nil, "", fmt.Errorf("encoding bundle: %w", err)
	}
	return doc, b.Revision, nil
}

func revisionOf(content []byte) string {
	sum := sha256.Sum256(content)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// ErrCorruptBundle is wrapped by every Decode error: the document must not be
// served.
var ErrCorruptBundle = errors.New("corrupt bundle")

// Decode parses a bundle document and checks its schema version and that its
// revision matches its content, so a truncated or hand-edited bundle is
// rejected instead of half-applied.
func Decode(doc []byte) (Bundle, error) {
	var b Bundle
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&b); err != nil {
		return Bundle{}, fmt.Errorf("%w: %v", ErrCorruptBundle, err)
	}
	if rest := bytes.TrimLeft(doc[dec.InputOffset():], " \t\r\n"); len(rest) > 0 {
		return Bundle{}, fmt.Errorf("%w: trailing data after the document", ErrCorruptBundle)
	}
	if b.SchemaVersion < SchemaVersionOrdered || b.SchemaVersion > SchemaVersion {
		return Bundle{}, fmt.Errorf("%w: schemaVersion %d is not supported (want %d to %d)", ErrCorruptBundle, b.SchemaVersion, SchemaVersionOrdered, SchemaVersion)
	}
	if want := b.NeededSchemaVersion(); b.SchemaVersion != want {
		return Bundle{}, fmt.Errorf("%w: schemaVersion %d does not match its content, which needs %d", ErrCorruptBundle, b.SchemaVersion, want)
	}
	_, rev, err := Encode(b)
	if err != nil {
		return Bundle{}, fmt.Errorf("%w: %v", ErrCorruptBundle, err)
	}
	if rev != b.Revision {
		return Bundle{}, fmt.Errorf("%w: revision %q does not match its content (%s)", ErrCorruptBundle, b.Revision, rev)
	}
	return b, nil
}
