package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Effect is what a rule, or a policy's default, decides.
// +kubebuilder:validation:Enum=allow;deny
type Effect string

const (
	EffectAllow Effect = "allow"
	EffectDeny  Effect = "deny"
)

// Operator compares a request field with a condition's value.
// +kubebuilder:validation:Enum=eq;neq;in;not_in;contains;not_contains;starts_with;ends_with;matches;gt;gte;lt;lte;exists;not_exists;is_empty;is_not_empty;is_valid_json
type Operator string

// PolicySpec is the desired state of a Policy.
type PolicySpec struct {
	// priority orders policies in a namespace: higher first, then by name.
	// The first policy's defaultEffect decides when no rule matches.
	// +optional
	// +kubebuilder:default=0
	Priority int32 `json:"priority,omitempty"`

	// defaultEffect applies when no rule of any policy matched, and only the
	// first policy's (in priority order) counts.
	// +optional
	// +kubebuilder:default=allow
	DefaultEffect Effect `json:"defaultEffect,omitempty"`

	// rules are scanned in order: the first matching deny decides at once; a
	// matching allow is remembered and a later deny still wins.
	// +required
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1000
	Rules []Rule `json:"rules"`
}

// Rule is a list of AND-ed conditions and the effect when all hold.
type Rule struct {
	// id names the rule in decisions and status; unique in the policy.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	ID string `json:"id"`

	// description is returned as the reason when this rule denies.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Description string `json:"description,omitempty"`

	// effect is allow or deny.
	// +required
	Effect Effect `json:"effect"`

	// conditions must all hold for the rule to match; none matches every call.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	Conditions []Condition `json:"conditions,omitempty"`
}

// Not in CEL: "in needs values" and the like. value and values hold any
// JSON scalar, so they are untyped in the schema, and the API server rejects
// CEL rules over untyped fields ("undefined field"); the engine checks them.

// Condition tests one field of the tool call. The schema rejects malformed
// paths itself (so they fail even with the webhook bypassed); the webhook
// adds what needs the engine: value types, regexes, forbidden segments.
type Condition struct {
	// field is a dot-path into the request: tool_name, agent_id,
	// input.command, kwargs.amount, args.0.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^[^.]+([.][^.]+){0,15}$`
	Field string `json:"field"`

	// operator is how the field is compared.
	// +required
	Operator Operator `json:"operator"`

	// value is a JSON scalar (string, number or bool).
	// +optional
	Value *apiextensionsv1.JSON `json:"value,omitempty"`

	// values is a list of JSON scalars, for in and not_in.
	// +optional
	// +kubebuilder:validation:MaxItems=1024
	Values []apiextensionsv1.JSON `json:"values,omitempty"`
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
// +kubebuilder:printcolumn:name="Rules",type=integer,JSONPath=`.status.ruleCount`
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`
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
