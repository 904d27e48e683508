package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ClusterFrozenAgentSpec is a FrozenAgent's spec for every namespace its
// selector chooses: the cluster's kill switch. FrozenAgentSpec's rules
// (CEL, carried over from the embedded type) apply as they are.
type ClusterFrozenAgentSpec struct {
	FrozenAgentSpec `json:",inline"`

	// namespaceSelector chooses the namespaces whose agents are frozen, by
	// their labels; empty or absent selects every namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
}

// ClusterFrozenAgentStatus is what the operator observed.
type ClusterFrozenAgentStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// namespaces is how many namespaces the selector chose when the status
	// was written.
	// +optional
	Namespaces int32 `json:"namespaces,omitempty"`

	// enforcement counts the sidecars that serve this object's current
	// generation (see the Enforced condition).
	// +optional
	Enforcement *EnforcementStatus `json:"enforcement,omitempty"`

	// conditions: Ready tells whether the freeze is published to every
	// namespace it selects (reason Expired once expiresAt has passed).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ClusterFrozenAgent denies every tool call of one agent, or of every agent
// (allAgents), in every namespace its selector chooses (AGENT_FROZEN).
// Sidecars watch ClusterFrozenAgents themselves, so it works with the
// operator down; like FrozenAgent it is validated by its schema only.
// Written by cluster administrators only.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=tgclusterfreeze;clusterfrozen,categories=toolgate
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Agent",type=string,JSONPath=`.spec.agentId`
// +kubebuilder:printcolumn:name="ServiceAccount",type=string,JSONPath=`.spec.serviceAccount`
// +kubebuilder:printcolumn:name="All",type=boolean,JSONPath=`.spec.allAgents`,description="freezes every agent of the selected namespaces"
// +kubebuilder:printcolumn:name="Namespaces",type=integer,JSONPath=`.status.namespaces`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Enforced",type=string,JSONPath=`.status.enforcement.summary`,description="sidecars serving the current generation / live sidecars"
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.spec.expiresAt`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ClusterFrozenAgent struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ClusterFrozenAgentSpec `json:"spec"`
	// +optional
	Status ClusterFrozenAgentStatus `json:"status,omitempty"`
}

// ClusterFrozenAgentList is a list of ClusterFrozenAgent.
// +kubebuilder:object:root=true
type ClusterFrozenAgentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterFrozenAgent `json:"items"`
}
