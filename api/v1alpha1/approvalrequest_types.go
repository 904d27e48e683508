package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ApprovalDecision is a person's answer to an ApprovalRequest.
// +kubebuilder:validation:Enum=Approved;Denied
type ApprovalDecision string

const (
	ApprovalApproved ApprovalDecision = "Approved"
	ApprovalDenied   ApprovalDecision = "Denied"
)

// Limits of an ApprovalRequest's fields, as its markers set them.
const (
	// MaxApprovalPreviewLength bounds the redacted preview of the call's
	// arguments (4 KiB).
	MaxApprovalPreviewLength = 4096
	MaxApprovalMessageLength = 1024
)

// ApprovalRequestSpec is the one call a person is asked about. The sidecar
// that held the call writes it, and nobody may change it: an approval is
// for this exact call.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable: an approval is bound to the exact call it was asked for"
type ApprovalRequestSpec struct {
	// agentId is the agent the call was decided for (bound by the sidecar).
	// +optional
	// +kubebuilder:validation:MaxLength=253
	AgentID string `json:"agentId,omitempty"`

	// serviceAccount is the ServiceAccount of the sidecar that asked; it
	// may never decide this request.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ServiceAccount string `json:"serviceAccount"`

	// tool is the call's tool_name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Tool string `json:"tool"`

	// server is the MCP server of the call, when it has one.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Server string `json:"server,omitempty"`

	// action is the call's action, when it has one.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Action string `json:"action,omitempty"`

	// argumentsDigest is "sha256:" and the hex SHA-256 of the call's
	// arguments (input, args and kwargs) as canonical JSON, keys sorted:
	// only a call with these exact arguments is approved.
	// +required
	// +kubebuilder:validation:Pattern=`^sha256:[0-9a-f]{64}$`
	ArgumentsDigest string `json:"argumentsDigest"`

	// preview is the arguments as the decision log redacts them, cut to
	// 4 KiB: what the approver reads.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	Preview string `json:"preview,omitempty"`

	// policy, rule and policyVersion name the rule that asked.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Policy string `json:"policy"`
	// +required
	// +kubebuilder:validation:MaxLength=63
	Rule string `json:"rule"`
	// +optional
	PolicyVersion int64 `json:"policyVersion,omitempty"`

	// bundleRevision is the revision of the bundle that asked.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	BundleRevision string `json:"bundleRevision,omitempty"`

	// reason is the asking rule's description.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`

	// expiresAt ends the request: no decision is accepted after it, and a
	// call still waiting is denied APPROVAL_TIMEOUT.
	// +required
	ExpiresAt metav1.Time `json:"expiresAt"`
}

// ApprovalRequestStatus is the decision and its use. decision, decidedBy,
// decidedAt and message are written by a person (toolgate approve, kubectl,
// any UI), once; consumedAt by the sidecar when the approved call runs.
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.decision) || (has(self.decision) && self.decision == oldSelf.decision)",message="decision cannot change once made"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.consumedAt) || (has(self.consumedAt) && self.consumedAt == oldSelf.consumedAt)",message="consumedAt cannot change once set: an approval is used once"
// +kubebuilder:validation:XValidation:rule="!has(self.decision) || has(self.decidedBy)",message="decidedBy is required with a decision: your user name"
type ApprovalRequestStatus struct {
	// decision is Approved or Denied.
	// +optional
	Decision ApprovalDecision `json:"decision,omitempty"`

	// decidedBy is the user who decided: the admission policy requires it
	// to be the name of the user writing the decision.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	DecidedBy string `json:"decidedBy,omitempty"`

	// decidedAt is when the decision was written.
	// +optional
	DecidedAt *metav1.Time `json:"decidedAt,omitempty"`

	// message is the approver's word to the agent (returned with a deny).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// consumedAt is when the approved call was let through: an approval
	// allows one call.
	// +optional
	ConsumedAt *metav1.Time `json:"consumedAt,omitempty"`

	// conditions, written by the operator: Ready is False while pending
	// (reason Pending), True once decided (Approved, Denied) or used
	// (Consumed), and False once Expired, with Stalled True (kstatus:
	// InProgress, Current, Failed).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ApprovalRequest asks a person to approve or deny one tool call an ask
// rule held. The sidecar creates it; a person decides it with a write of
// its status subresource, which RBAC and the admission policy shipped with
// toolgate keep from the agent itself.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tgapproval;approvals,categories=toolgate
// +kubebuilder:printcolumn:name="Agent",type=string,JSONPath=`.spec.agentId`
// +kubebuilder:printcolumn:name="Tool",type=string,JSONPath=`.spec.tool`
// +kubebuilder:printcolumn:name="Decision",type=string,JSONPath=`.status.decision`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.spec.expiresAt`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.spec.reason`,priority=10
// +kubebuilder:printcolumn:name="Consumed",type=string,JSONPath=`.status.consumedAt`,priority=10
type ApprovalRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ApprovalRequestSpec `json:"spec"`
	// +optional
	Status ApprovalRequestStatus `json:"status,omitempty"`
}

// ApprovalRequestList is a list of ApprovalRequest.
// +kubebuilder:object:root=true
type ApprovalRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ApprovalRequest `json:"items"`
}

// Condition reasons of an ApprovalRequest.
const (
	ReasonApprovalPending = "Pending"
	ReasonApproved        = "Approved"
	ReasonDenied          = "Denied"
	ReasonApprovalExpired = "Expired"
	ReasonConsumed        = "Consumed"
	// ReasonApprovalRequested is the Event the operator emits for a new
	// ApprovalRequest, naming the call and the command that approves it;
	// its later Events carry the Ready reasons above.
	ReasonApprovalRequested = "ApprovalRequested"
)

// Labels the sidecar sets on an ApprovalRequest, so that a pending one is
// found again (and counted per agent) by a label selector.
const (
	// LabelApprovalKey is a hash of the call's agent, tool, server, action
	// and argument digest: an identical call reuses the pending request.
	LabelApprovalKey = "toolgate.dev/approval-key"
	// LabelApprovalAgent is a hash of the agent id (agent ids are not
	// always valid label values).
	LabelApprovalAgent = "toolgate.dev/approval-agent"
)
