package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Effect is what a policy's default decides when no rule matched.
// +kubebuilder:validation:Enum=allow;deny
type Effect string

const (
	EffectAllow Effect = "allow"
	EffectDeny  Effect = "deny"
)

// RuleEffect is what a rule decides. warn and audit allow the call: warn
// adds the rule's reason to the result's warnings, audit only marks it;
// ask holds the call until a person approves it (an ApprovalRequest). A
// separate type from Effect because a default can only allow or deny.
// +kubebuilder:validation:Enum=allow;deny;warn;audit;ask;redact
type RuleEffect string

// RulePhase is when a rule runs: on the call, or on what the tool
// returned.
// +kubebuilder:validation:Enum=call;result
type RulePhase string

const (
	PhaseCall   RulePhase = "call"
	PhaseResult RulePhase = "result"
)

const (
	RuleAllow  RuleEffect = "allow"
	RuleDeny   RuleEffect = "deny"
	RuleWarn   RuleEffect = "warn"
	RuleAudit  RuleEffect = "audit"
	RuleAsk    RuleEffect = "ask"
	RuleRedact RuleEffect = "redact"
)

// Evaluation is how a policy's rules decide.
// +kubebuilder:validation:Enum=ordered;tiered
type Evaluation string

const (
	// EvaluationOrdered scans the rules in order: the first matching deny
	// decides, otherwise the last matching allow (seed 000).
	EvaluationOrdered Evaluation = "ordered"
	// EvaluationTiered lets only the matching rules of the highest priority
	// decide, deny over warn over audit over allow (seed 001).
	EvaluationTiered Evaluation = "tiered"
)

// Operator compares a request field with a condition's value.
// +kubebuilder:validation:Enum=eq;neq;in;not_in;contains;not_contains;starts_with;ends_with;matches;gt;gte;lt;lte;exists;not_exists;is_empty;is_not_empty;is_valid_json;detect
type Operator string

// PolicyMode says whether a policy decides (Enforce) or is only recorded
// beside the decision (Audit, shadow mode).
// +kubebuilder:validation:Enum=Enforce;Audit
type PolicyMode string

const (
	PolicyModeEnforce PolicyMode = "Enforce"
	PolicyModeAudit   PolicyMode = "Audit"
)

// The priority rule reads every rule, so it sits on PolicySpec rather than
// on Rule. An explicit priority: 0 is what an omitted one means, so it is
// allowed. Its message is fixed: a messageExpression listing the rules' ids
// is estimated far over the API server's cost budget.
// +kubebuilder:validation:XValidation:rule="(has(self.evaluation) && self.evaluation == 'tiered') || self.rules.all(r, !has(r.priority) || r.priority == 0)",fieldPath=".rules",message="spec.rules[].priority (non-zero) is only allowed when spec.evaluation is tiered: an ordered policy scans its rules in order, so set evaluation: tiered or remove the rules' priority"

// PolicySpec is the desired state of a Policy.
type PolicySpec struct {
	// priority orders policies in a namespace: higher first, then by name.
	// The first policy's defaultEffect decides when no rule matches.
	// +optional
	// +kubebuilder:default=0
	Priority int32 `json:"priority,omitempty"`

	// evaluation is ordered (when omitted) or tiered. An ordered policy's
	// rules are scanned in order: the first matching deny decides at once; a
	// matching allow, warn or audit is remembered and a later deny still
	// wins. A tiered policy computes one verdict: among its matching rules
	// only those of the highest priority decide, deny over warn over audit
	// over allow.
	// +optional
	Evaluation Evaluation `json:"evaluation,omitempty"`

	// mode is Enforce (the default) or Audit. An Audit policy never changes
	// a decision: what it would have decided on its own is recorded on the
	// decision (shadow), in the decision log and in
	// toolgate_sidecar_shadow_decisions_total, so a new policy can be
	// watched against real traffic before it enforces.
	// +optional
	// +kubebuilder:default=Enforce
	Mode PolicyMode `json:"mode,omitempty"`

	// defaultEffect applies when no rule of any policy matched, and only the
	// first policy's (in priority order) counts. When omitted it is allow for
	// an ordered policy and deny for a tiered one. The bundle builder, not
	// the CRD, fills it in: a CRD default cannot depend on evaluation.
	// +optional
	DefaultEffect Effect `json:"defaultEffect,omitempty"`

	// rules, unique by id; spec.evaluation says how they decide.
	// +required
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	Rules []Rule `json:"rules"`
}

// PolicyStatus is what the operator observed and published.
type PolicyStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// bundleRevision is the revision of the namespace bundle this policy is
	// live in.
	// +optional
	BundleRevision string `json:"bundleRevision,omitempty"`

	// ruleCount is the number of rules in the policy.
	// +optional
	RuleCount int32 `json:"ruleCount,omitempty"`

	// enforcement counts the sidecars that serve this object's current
	// generation (see the Enforced condition).
	// +optional
	Enforcement *EnforcementStatus `json:"enforcement,omitempty"`

	// conditions: Ready tells whether the policy is compiled and published.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Policy decides which tool calls agents in its namespace may make.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tgp;tgpolicy,categories=toolgate
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Enforced",type=string,JSONPath=`.status.enforcement.summary`,description="sidecars serving the current generation / live sidecars"
// +kubebuilder:printcolumn:name="Rules",type=integer,JSONPath=`.status.ruleCount`
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`,description="Enforce, or Audit: recorded beside decisions, never deciding"
// +kubebuilder:printcolumn:name="Evaluation",type=string,JSONPath=`.spec.evaluation`
// +kubebuilder:printcolumn:name="Default",type=string,JSONPath=`.spec.defaultEffect`
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.bundleRevision`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=10
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Policy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec PolicySpec `json:"spec"`
	// +optional
	Status PolicyStatus `json:"status,omitempty"`
}

// PolicyList is a list of Policy.
// +kubebuilder:object:root=true
type PolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Policy `json:"items"`
}
