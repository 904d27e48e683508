package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The length limits of FrozenAgentSpec's fields, as its markers below set
// them in the CRD schema (which counts characters, not bytes); the
// schema, applied by the API server and by internal/crdschema, is what
// enforces them. TestCheckFrozenAgent in internal/crdschema keeps these
// equal to the generated CRD.
const (
	MaxAgentIDLength        = 253
	MaxServiceAccountLength = 253
	MaxReasonLength         = 1024
)

// FrozenAgentSpec names the agent to stop: by agentId, by serviceAccount,
// or both (either one matching freezes); or every agent of the namespace
// (allAgents). What a freeze stops cannot change in place: that would lift
// it from the agents it stopped. allAgents: false is the same as none (Go
// clients omit it), so writing or dropping it is no change.
// +kubebuilder:validation:XValidation:rule="has(self.agentId) || has(self.serviceAccount) || (has(self.allAgents) && self.allAgents)",message="agentId, serviceAccount or allAgents: true is required"
// +kubebuilder:validation:XValidation:rule="!(has(self.allAgents) && self.allAgents) || (!has(self.agentId) && !has(self.serviceAccount))",message="allAgents: true freezes every agent of the namespace: it takes no agentId or serviceAccount"
// +kubebuilder:validation:XValidation:rule="(has(self.allAgents) && self.allAgents) == (has(oldSelf.allAgents) && oldSelf.allAgents)",message="allAgents is immutable: create another FrozenAgent"
// +kubebuilder:validation:XValidation:rule="!has(self.agentId) || self.agentId == self.agentId.trim()",message="agentId must not start or end with whitespace"
// +kubebuilder:validation:XValidation:rule="has(self.agentId) == has(oldSelf.agentId) && (!has(self.agentId) || self.agentId == oldSelf.agentId)",message="agentId is immutable: create another FrozenAgent to freeze another agent"
// +kubebuilder:validation:XValidation:rule="has(self.serviceAccount) == has(oldSelf.serviceAccount) && (!has(self.serviceAccount) || self.serviceAccount == oldSelf.serviceAccount)",message="serviceAccount is immutable: create another FrozenAgent to freeze another service account"
type FrozenAgentSpec struct {
	// agentId is the agent to deny everything to, compared case-insensitively
	// with the agent id a sidecar decides for.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	AgentID string `json:"agentId,omitempty"`

	// serviceAccount freezes every sidecar running as this ServiceAccount in
	// the namespace, whatever agent id it decides for: the injector passes
	// the Pod's serviceAccountName to its sidecar, which the agent cannot
	// change.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ServiceAccount string `json:"serviceAccount,omitempty"`

	// allAgents: true denies everything to every sidecar of the namespace,
	// whatever identity it has (toolgate freeze --all).
	// +optional
	AllAgents bool `json:"allAgents,omitempty"`

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

	// enforcement counts the sidecars that serve this object's current
	// generation (see the Enforced condition).
	// +optional
	Enforcement *EnforcementStatus `json:"enforcement,omitempty"`

	// conditions: Ready tells whether the freeze is published (reason
	// Expired once expiresAt has passed).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// FrozenAgent denies every tool call of one agent, or of every agent
// (allAgents), in its namespace (AGENT_FROZEN). It is validated by its
// schema only, never by a webhook, so the kill switch works while webhooks
// are down.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tgfreeze;frozen,categories=toolgate
// +kubebuilder:printcolumn:name="Agent",type=string,JSONPath=`.spec.agentId`
// +kubebuilder:printcolumn:name="ServiceAccount",type=string,JSONPath=`.spec.serviceAccount`
// +kubebuilder:printcolumn:name="All",type=boolean,JSONPath=`.spec.allAgents`,description="freezes every agent of the namespace"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Enforced",type=string,JSONPath=`.status.enforcement.summary`,description="sidecars serving the current generation / live sidecars"
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
