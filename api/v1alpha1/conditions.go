package v1alpha1

// Condition types and reasons toolgate writes on Policies and FrozenAgents.
// The operator sets them and the freeze command reads them, so they live
// with the API rather than with either.
const (
	// ConditionReady is True when the object's current generation is live in
	// the namespace's published bundle.
	ConditionReady = "Ready"
	// ConditionReconciling (kstatus) is True while the object's current
	// generation is being published (reason Publishing), and while its
	// publish fails for a reason expected to pass, the API server busy or
	// briefly unreachable (reason PublishRetrying, with Ready's message).
	// kstatus (Flux, kubectl wait's callers) reads it as InProgress.
	ConditionReconciling = "Reconciling"
	// ConditionStalled (kstatus) is True while the object's current
	// generation cannot be published until something is fixed:
	// CompileError, BundleTooLarge, or PublishFailed with an error that is
	// not transient (Forbidden, Invalid, ...), with Ready's reason and
	// message. kstatus reads it as Failed rather than waiting for it.
	ConditionStalled = "Stalled"

	ReasonPublished      = "Published"
	ReasonCompileError   = "CompileError"
	ReasonBundleTooLarge = "BundleTooLarge"
	ReasonExpired        = "Expired"
	// ReasonConflict (Ready=False) is an Agent whose ServiceAccount an older
	// Agent already registers: the older one is the agent.
	ReasonConflict = "Conflict"
	// ReasonPublishFailed: the API server refused the bundle ConfigMap's
	// write; the message carries its error. Retried with backoff; with
	// Reconciling=True when the error is expected to pass, Stalled=True
	// otherwise.
	ReasonPublishFailed = "PublishFailed"
	// ReasonRegoExportRefused (Ready=True: the policy is live in the JSON
	// bundle sidecars enforce) says the operator, publishing Rego bundles
	// (--publish-rego), could not export this policy to Rego: the
	// namespace's bundle ConfigMap carries no Rego bundle until it can.
	ReasonRegoExportRefused = "RegoExportRefused"
	// ReasonPublishing is Reconciling's reason while a new generation is
	// on its way to the bundle.
	ReasonPublishing = "Publishing"
	// ReasonPublishRetrying is Reconciling's reason while the bundle's
	// write fails for a reason expected to pass (Ready is then False,
	// PublishFailed): the operator retries with backoff.
	ReasonPublishRetrying = "PublishRetrying"
	// ReasonSigningKeysInvalid is the Warning event on the operator's key
	// Secret when it no longer holds a valid keyring (or was deleted): the
	// operator keeps signing with the last valid one.
	ReasonSigningKeysInvalid = "SigningKeysInvalid"

	// ReasonApplied (Ready=True) is a PolicyException compiled into its
	// namespace's bundle and in force.
	ReasonApplied = "Applied"
	// ReasonPolicyNotFound (Ready=False) is a PolicyException whose
	// policyRef names no Policy of its namespace, or no ClusterPolicy that
	// selects it: it exempts nothing.
	ReasonPolicyNotFound = "PolicyNotFound"
	// ReasonExceptionsNotAllowed (Ready=False) is a PolicyException naming
	// a ClusterPolicy that does not set allowExceptions: true.
	ReasonExceptionsNotAllowed = "ExceptionsNotAllowed"
	// ReasonSelectorError (Ready=False, Stalled) is a ClusterPolicy or
	// ClusterFrozenAgent whose namespaceSelector does not parse: it is
	// applied to every namespace until fixed (fail closed).
	ReasonSelectorError = "SelectorError"
	// ReasonToolDefinitionChanged (Warning event on an MCPUpstream, from a
	// sidecar) is a pinned tool listed with a definition whose digest is
	// not its pin.
	ReasonToolDefinitionChanged = "ToolDefinitionChanged"
	// ReasonToolNotPinned (Warning event on an MCPUpstream, from a sidecar)
	// is a tool listed that spec.pinnedTools does not pin.
	ReasonToolNotPinned = "ToolNotPinned"
)

// Labels and annotations toolgate puts on the objects it writes or reads
// (the Pod annotations that drive injection, with the grammar of their
// values, are in pod_annotations.go).
const (
	// ManagedByLabel marks objects toolgate creates (the bundle ConfigMap,
	// the sidecar's Role and RoleBinding, webhook certificates).
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// ManagedByValue is ManagedByLabel's value for the operator's objects.
	ManagedByValue = "toolgate"
	// ManagedByCLIValue is ManagedByLabel's value for objects `toolgate
	// freeze` creates.
	ManagedByCLIValue = "toolgate-cli"

	// BundleLabel marks the bundle ConfigMap.
	BundleLabel = "toolgate.dev/bundle"
	// RevisionAnnotation carries the bundle ConfigMap's revision.
	RevisionAnnotation = "toolgate.dev/revision"

	// LabelInjected marks Pods that carry the injected sidecar.
	LabelInjected = "toolgate.dev/injected"
	// LabelEnforce on a Namespace ("true") makes the enforce-sidecar
	// ValidatingAdmissionPolicy refuse every Pod there that lacks the
	// injected sidecar (config/enforce, the chart's enforce-sidecar.yaml).
	LabelEnforce = "toolgate.dev/enforce"
)
