package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PolicyKind names the kind a PolicyException exempts from.
// +kubebuilder:validation:Enum=Policy;ClusterPolicy
type PolicyKind string

const (
	PolicyKindPolicy        PolicyKind = "Policy"
	PolicyKindClusterPolicy PolicyKind = "ClusterPolicy"
)

// PolicyReference names a Policy of the exception's namespace or a
// ClusterPolicy.
type PolicyReference struct {
	// kind is Policy or ClusterPolicy.
	// +required
	Kind PolicyKind `json:"kind"`
	// name is the policy's metadata.name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ExceptionAgents names the agents exempted: by agent id (compared as
// freezes compare it, case-insensitively) and/or by the ServiceAccount
// their sidecar runs as.
// +kubebuilder:validation:XValidation:rule="(has(self.agentIds) && size(self.agentIds) > 0) || (has(self.serviceAccounts) && size(self.serviceAccounts) > 0)",message="agentIds or serviceAccounts is required"
type ExceptionAgents struct {
	// +optional
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	AgentIDs []string `json:"agentIds,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ServiceAccounts []string `json:"serviceAccounts,omitempty"`
}

// PolicyExceptionSpec exempts agents from named rules of one policy until
// it expires.
type PolicyExceptionSpec struct {
	// policyRef is the Policy (of this namespace) or the ClusterPolicy
	// (which must set allowExceptions: true) whose rules are exempted.
	// +required
	PolicyRef PolicyReference `json:"policyRef"`

	// ruleIds are the exempted rules' ids.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	RuleIDs []string `json:"ruleIds"`

	// agents are who is exempted.
	// +required
	Agents ExceptionAgents `json:"agents"`

	// expiresAt ends the exception, on each sidecar's clock; at most the
	// operator's --max-exception-days (default 30) ahead when written.
	// +required
	ExpiresAt metav1.Time `json:"expiresAt"`

	// justification says why, for whoever reviews exceptions.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Justification string `json:"justification"`
}

// PolicyExceptionStatus is what the operator observed and published.
type PolicyExceptionStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// bundleRevision is the revision of the namespace bundle this exception
	// is live in.
	// +optional
	BundleRevision string `json:"bundleRevision,omitempty"`

	// conditions: Ready tells whether the exception is published (reason
	// Expired once expiresAt has passed, PolicyNotFound, ExceptionsNotAllowed).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// PolicyException exempts named agents from named rules of a Policy in its
// namespace, or of a ClusterPolicy that allows exceptions, until it
// expires. A decision it changed says so (exceptionApplied).
// +kubebuilder:object:root=true
// +kubebuilder:resource:shortName=tgexception;tgpolex,categories=toolgate
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Kind",type=string,JSONPath=`.spec.policyRef.kind`
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.policyRef.name`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.spec.expiresAt`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PolicyException struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec PolicyExceptionSpec `json:"spec"`
	// +optional
	Status PolicyExceptionStatus `json:"status,omitempty"`
}

// PolicyExceptionList is a list of PolicyException.
// +kubebuilder:object:root=true
type PolicyExceptionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PolicyException `json:"items"`
}
