package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FrozenAgentSpec names the agent to stop.
// +kubebuilder:validation:XValidation:rule="self.agentId == self.agentId.trim()",message="agentId must not start or end with whitespace"
// +kubebuilder:validation:XValidation:rule="self.agentId == oldSelf.agentId",message="agentId is immutable: create another FrozenAgent to freeze another agent"
type FrozenAgentSpec struct {
	// agentId is the agent to deny everything to, compared case-insensitively.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	AgentID string `json:"agentId"`

	// reason is returned with every AGENT_FROZEN deny.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`

	// expiresAt ends the freeze; absent means until deleted.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`
}

// FrozenAgentStatus is what the operator observed and published.
type FrozenAgentStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// bundleRevision is the revision of the namespace bundle this freeze is
	// live in.
	// +optional
	BundleRevision string `json:"bundleRevision,omitempty"`

	// conditions: Ready tells whether the freeze is published (reason
	// Expired once expiresAt has passed).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// FrozenAgent denies every tool call of one agent in its namespace
// (AGENT_FROZEN). It is validated by its schema only, never by a webhook, so
// the kill switch works while webhooks are down.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tgfreeze;frozen,categories=toolgate
// +kubebuilder:printcolumn:name="Agent",type=string,JSONPath=`.spec.agentId`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.spec.expiresAt`
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.bundleRevision`,priority=10
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type FrozenAgent struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec FrozenAgentSpec `json:"spec"`
	// +optional
	Status FrozenAgentStatus `json:"status,omitempty"`
}

// FrozenAgentList is a list of FrozenAgent.
// +kubebuilder:object:root=true
type FrozenAgentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FrozenAgent `json:"items"`
}
