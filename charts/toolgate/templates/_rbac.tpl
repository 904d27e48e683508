{{/*
What the manager needs in every namespace it watches: the rules generated
into config/rbac/role.yaml from the controllers' and webhooks' markers, less
writing leases (leader election only needs that in the release namespace, see
role-release-namespace.yaml). test/chart checks with SubjectAccessReviews that
the installed chart grants every rule of role.yaml.
*/}}
{{- define "toolgate.namespacedRules" -}}
- apiGroups: [toolgate.dev]
  resources: [policies, frozenagents, agents, mcpupstreams, policyexceptions]
  verbs: [get, list, watch]
- apiGroups: [toolgate.dev]
  resources: [policies/status, frozenagents/status, agents/status, mcpupstreams/status, policyexceptions/status]
  verbs: [get, update, patch]
# ApprovalRequests: the operator patches their conditions (never a
# decision) and deletes them after approvals.retention; the injector grants
# sidecars create, get, list and watch on them and update on their status,
# which it may only grant holding them.
- apiGroups: [toolgate.dev]
  resources: [approvalrequests]
  verbs: [get, list, watch, create, delete]
- apiGroups: [toolgate.dev]
  resources: [approvalrequests/status]
  verbs: [get, update, patch]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch]
# Sidecars report what they serve in a Lease named after their Pod; the
# operator reads those, and the injected Pods, into the Enforced condition.
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch]
{{- if .Values.reports.enabled }}
# Reports: one per namespace, written by server-side apply.
{{- if eq .Values.reports.format "wgpolicyk8s" }}
- apiGroups: [wgpolicyk8s.io]
  resources: [policyreports]
{{- else }}
- apiGroups: [openreports.io]
  resources: [reports]
{{- end }}
  verbs: [get, list, create, update, patch]
{{- end }}
{{- if .Values.sidecarInjection.enabled }}
# Injection grants each injected pod's service account read access to its
# namespace's bundle ConfigMap and FrozenAgents, its approvals, create
# on Events (a pinned MCP tool's drift, on its MCPUpstream) and get, create
# and update on Leases (its own Pod's, kept to it by the sidecar Lease
# admission policy) (see webhook.SidecarRoleRules); holding that access
# (configmaps, frozenagents, approvalrequests, events and the leases below)
# is what lets the manager grant it without bind or escalate.
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings]
  verbs: [get, create, update]
- apiGroups: [coordination.k8s.io]
  resources: [leases]
  verbs: [get, create, update]
{{- end }}
{{- end }}

{{/*
Cluster-scoped rules: the operator and the injector read Namespaces' labels
(they belong in the bundle, and choose the ClusterPolicies and
ClusterFrozenAgents it holds); the operator compiles those and writes their
status; in self mode the certificate rotator watches the webhook
configurations and writes the CA into ours only.
*/}}
{{- define "toolgate.clusterRules" -}}
- apiGroups: [""]
  resources: [namespaces]
  verbs: [get, list, watch]
- apiGroups: [toolgate.dev]
  resources: [clusterpolicies, clusterfrozenagents]
  verbs: [get, list, watch]
- apiGroups: [toolgate.dev]
  resources: [clusterpolicies/status, clusterfrozenagents/status]
  verbs: [get, update, patch]
{{- if .Values.reports.enabled }}
# The reports endpoint asks who sent each batch (a TokenReview for the
# reports audience).
- apiGroups: [authentication.k8s.io]
  resources: [tokenreviews]
  verbs: [create]
{{- end }}
{{- if include "toolgate.selfManagedCerts" . }}
- apiGroups: [admissionregistration.k8s.io]
  resources: [validatingwebhookconfigurations, mutatingwebhookconfigurations]
  verbs: [list, watch]
- apiGroups: [admissionregistration.k8s.io]
  resources: [validatingwebhookconfigurations]
  resourceNames: [{{ include "toolgate.validatingWebhookName" . }}]
  verbs: [get, update]
{{- if .Values.sidecarInjection.enabled }}
- apiGroups: [admissionregistration.k8s.io]
  resources: [mutatingwebhookconfigurations]
  resourceNames: [{{ include "toolgate.mutatingWebhookName" . }}]
  verbs: [get, update]
{{- end }}
{{- end }}
{{- end }}
