package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterPolicySpec is a Policy's spec plus the namespaces it applies to.
// PolicySpec's rules (CEL, carried over from the embedded type) apply as
// they are.
type ClusterPolicySpec struct {
	PolicySpec `json:",inline"`

	// namespaceSelector chooses the namespaces whose bundles hold this
	// policy, by their labels; empty or absent selects every namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// allowExceptions lets a namespace's PolicyExceptions exempt agents
	// from this policy's rules. Off by default: a guardrail the platform
	// team owns is not loosened by whoever administers a namespace.
	// +optional
	AllowExceptions bool `json:"allowExceptions,omitempty"`
}

// ClusterPolicyStatus is what the operator observed and published.
type ClusterPolicyStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// ruleCount is the number of rules in the policy.
	// +optional
	RuleCount int32 `json:"ruleCount,omitempty"`

	// namespaces is how many namespaces the selector chose when the status
	// was written.
	// +optional
	Namespaces int32 `json:"namespaces,omitempty"`

	// enforcement counts the sidecars that serve this object's current
	// generation (see the Enforced condition).
	// +optional
	Enforcement *EnforcementStatus `json:"enforcement,omitempty"`

	// conditions: Ready tells whether the policy compiles and is published
	// to every namespace it selects.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ClusterPolicy decides, beside each selected namespace's Policies, which
// tool calls agents may make; a namespace cannot loosen it: the decision
// is the most restrictive of the cluster level (the ClusterPolicies that
// select the namespace) and the namespace level (its Policies). Written by
// cluster administrators only.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=tgcp;tgclusterpolicy,categories=toolgate
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Enforced",type=string,JSONPath=`.status.enforcement.summary`,description="sidecars serving the current generation / live sidecars"
// +kubebuilder:printcolumn:name="Rules",type=integer,JSONPath=`.status.ruleCount`
// +kubebuilder:printcolumn:name="Namespaces",type=integer,JSONPath=`.status.namespaces`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`,description="Enforce, or Audit: recorded beside decisions, never deciding"
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`
// +kubebuilder:printcolumn:name="Exceptions",type=boolean,JSONPath=`.spec.allowExceptions`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=10
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ClusterPolicySpec `json:"spec"`
	// +optional
	Status ClusterPolicyStatus `json:"status,omitempty"`
}

// ClusterPolicyList is a list of ClusterPolicy.
// +kubebuilder:object:root=true
type ClusterPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterPolicy `json:"items"`
}
