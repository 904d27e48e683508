package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LabelEnvironment on a Namespace names the environment every agent of the
// namespace runs in (e.g. prod) once its agents are registered (Agent
// objects, or LabelEnforce): the Pod's toolgate.dev/environment annotation
// no longer counts there. Namespaces' labels are written by cluster admins,
// never by a namespace's editors.
const LabelEnvironment = "toolgate.dev/environment"

// Bounds of Agent and MCPUpstream fields, as their markers set them in
// the CRD schema.
const (
	MaxAgentUpstreams = 64
	MaxURLLength      = 2048
	// MaxPinnedTools bounds an MCPUpstream's spec.pinnedTools.
	MaxPinnedTools = 512
	// MaxToolNameLength is the longest tool name MCP allows (and the
	// official SDKs enforce): 1 to 128 of A-Z, a-z, 0-9, '_', '-', '.'.
	MaxToolNameLength = 128
)

// Pinning is what a pinned MCPUpstream's proxy does with a tool whose
// definition differs from its pin, or that has no pin.
// +kubebuilder:validation:Enum=strict;warn
type Pinning string

const (
	// PinningStrict hides a tool without a pin from tools/list and denies
	// its calls TOOL_DEFINITION_CHANGED; every drift is reported.
	PinningStrict Pinning = "strict"
	// PinningWarn shows a tool without a pin and reports it (an Event on
	// the MCPUpstream and a metric). A pinned tool whose definition
	// changed is hidden and denied under both.
	PinningWarn Pinning = "warn"
)

// ToolDigest is the sha256 of a tool's definition, as `toolgate mcp pin`
// prints it: 64 lower-case hex digits over the canonical JSON of the
// tool's name, description, inputSchema and annotations (docs/pinning.md).
// +kubebuilder:validation:Pattern=`^[0-9a-f]{64}$`
// +kubebuilder:validation:MinLength=64
// +kubebuilder:validation:MaxLength=64
type ToolDigest string

// AgentSpec is who the sidecars running as one ServiceAccount are: written
// by the namespace's admins, never by the Pod's author.
type AgentSpec struct {
	// serviceAccountName is the ServiceAccount this Agent's Pods run as.
	// One Agent per ServiceAccount: when two name the same one, the older
	// (then the first by name) is the agent and the other is Ready=False,
	// reason Conflict. The sidecar learns the ServiceAccount it runs as
	// from the API server (SelfSubjectReview), not from its arguments.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ServiceAccountName string `json:"serviceAccountName"`

	// agentId is the agent_id every decision of this agent is made for,
	// whatever a request says (default: the Agent's name).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-a-zA-Z0-9_.:/@]+$`
	AgentID string `json:"agentId,omitempty"`

	// roles are the agent's roles, in place of any a request or a Pod
	// annotation claims; empty binds no roles.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[-a-zA-Z0-9_.:/@]+$`
	Roles []string `json:"roles,omitempty"`

	// upstreams name the MCPUpstreams of this namespace the agent may reach
	// through its sidecar's MCP proxy; a Pod asks for them by name.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=50
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Upstreams []string `json:"upstreams,omitempty"`
}

// IdentityStatus is what the operator observed and published of an Agent
// or an MCPUpstream.
type IdentityStatus struct {
	// observedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// bundleRevision is the revision of the namespace bundle this object is
	// live in.
	// +optional
	BundleRevision string `json:"bundleRevision,omitempty"`

	// conditions: Ready tells whether the object is published (reason
	// Conflict when another Agent names the same ServiceAccount).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Agent registers who the Pods running as one ServiceAccount are: their
// agent id, roles and the MCP upstreams they may reach. In a namespace
// with at least one Agent (or labelled toolgate.dev/enforce=true), a Pod
// whose ServiceAccount has no Agent is refused by the injector, and a
// sidecar that finds none for its ServiceAccount denies every call
// AGENT_UNREGISTERED. Written by namespace admins; edit and view read it.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tgagent,categories=toolgate
// +kubebuilder:printcolumn:name="ServiceAccount",type=string,JSONPath=`.spec.serviceAccountName`
// +kubebuilder:printcolumn:name="Agent",type=string,JSONPath=`.spec.agentId`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.bundleRevision`,priority=10
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Agent struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec AgentSpec `json:"spec"`
	// +optional
	Status IdentityStatus `json:"status,omitempty"`
}

// ID is the agent id the Agent binds: spec.agentId, or its name.
func (a *Agent) ID() string {
	if a.Spec.AgentID != "" {
		return a.Spec.AgentID
	}
	return a.Name
}

// AgentList is a list of Agent.
// +kubebuilder:object:root=true
type AgentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Agent `json:"items"`
}

// SecretKeyRef names one key of a Secret in the object's namespace.
type SecretKeyRef struct {
	// name is the Secret's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Name string `json:"name"`
	// key is the Secret's key (default: header).
	// +optional
	// +kubebuilder:default=header
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// MCPUpstreamSpec is one MCP server agents of the namespace may reach.
// +kubebuilder:validation:XValidation:rule="!has(self.pinning) || has(self.pinnedTools)",message="pinning needs pinnedTools: print them with toolgate mcp pin URL"
// +kubebuilder:validation:XValidation:rule="isURL(self.url) && url(self.url).getScheme() in ['http', 'https'] && size(url(self.url).getHostname()) > 0",message="url must be an absolute http or https URL"
// +kubebuilder:validation:XValidation:rule="!self.url.contains('@')",message="url must not hold credentials: put them in the Secret credentialSecretRef names"
type MCPUpstreamSpec struct {
	// url is the MCP server's Streamable HTTP endpoint, http or https.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url"`

	// credentialSecretRef names the Secret key holding one header line,
	// e.g. "Authorization: Bearer ...", that the sidecar adds to every
	// request to this upstream. The injector mounts it into the sidecar
	// container alone; it never enters the bundle.
	// +optional
	CredentialSecretRef *SecretKeyRef `json:"credentialSecretRef,omitempty"`

	// pinnedTools maps tool names to the sha256 of their definitions
	// (`toolgate mcp pin URL` prints them). The sidecar's MCP proxy checks
	// every tools/list answer of this upstream against them: a tool whose
	// definition changed is hidden and its calls are denied
	// TOOL_DEFINITION_CHANGED, and so is a tool with no pin (unless
	// pinning is warn). Each drift is reported once, as an Event on this
	// MCPUpstream and in toolgate_sidecar_mcp_tool_drift_total.
	// +optional
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=512
	// +kubebuilder:validation:XValidation:rule="self.all(name, name.size() <= 128 && name.matches('^[A-Za-z0-9_.-]+$'))",message="a tool name must be 1-128 of A-Z, a-z, 0-9, '_', '-' or '.', as MCP names tools"
	PinnedTools map[string]ToolDigest `json:"pinnedTools,omitempty"`

	// pinning is what happens to a tool pinnedTools does not pin: strict
	// hides it and denies its calls, warn only reports it (a pinned tool
	// whose definition changed is hidden under both). It
	// defaults to strict whenever pinnedTools is set (the bundle states
	// the mode applied), and needs pinnedTools.
	// +optional
	Pinning Pinning `json:"pinning,omitempty"`
}

// EffectivePinning is the pinning applied: spec.pinning, strict when it
// is unset and pins are; "" without pins.
func (s *MCPUpstreamSpec) EffectivePinning() Pinning {
	switch {
	case len(s.PinnedTools) == 0:
		return ""
	case s.Pinning == "":
		return PinningStrict
	}
	return s.Pinning
}

// MCPUpstream is an MCP server the namespace's admins let agents reach
// through their sidecar's proxy, by name: the name is the `server` every
// call to it is decided with (targets.servers), and a Pod cannot rename it
// or point it elsewhere.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tgupstream,categories=toolgate
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.spec.url`
// +kubebuilder:printcolumn:name="Pinning",type=string,JSONPath=`.spec.pinning`,priority=10
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type MCPUpstream struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec MCPUpstreamSpec `json:"spec"`
	// +optional
	Status IdentityStatus `json:"status,omitempty"`
}

// MCPUpstreamList is a list of MCPUpstream.
// +kubebuilder:object:root=true
type MCPUpstreamList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MCPUpstream `json:"items"`
}
