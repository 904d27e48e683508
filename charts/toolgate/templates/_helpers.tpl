{{/* Chart name, overridable. */}}
{{- define "toolgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Prefix of every object name. The release name alone when it already contains
the chart name, so `helm install toolgate` gives the names the manager's flags
default to (toolgate-webhook, toolgate-webhook-certs, ...).
*/}}
{{- define "toolgate.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "toolgate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "toolgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "toolgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: manager
{{- end }}

{{- define "toolgate.labels" -}}
helm.sh/chart: {{ include "toolgate.chart" . }}
app.kubernetes.io/name: {{ include "toolgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: toolgate
{{- end }}

{{- define "toolgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (printf "%s-manager" (include "toolgate.fullname" .)) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* An image reference: repository, then @digest or :tag (default: appVersion). */}}
{{- define "toolgate.imageRef" -}}
{{- $image := index . 0 }}
{{- $root := index . 1 }}
{{- if $image.digest }}
{{- printf "%s@%s" $image.repository $image.digest }}
{{- else }}
{{- printf "%s:%s" $image.repository (default $root.Chart.AppVersion $image.tag) }}
{{- end }}
{{- end }}

{{- define "toolgate.image" -}}
{{- include "toolgate.imageRef" (list .Values.image .) }}
{{- end }}

{{/* The sidecar defaults to the manager's image: one binary serves both. */}}
{{- define "toolgate.sidecarImage" -}}
{{- if .Values.sidecarInjection.image.repository }}
{{- include "toolgate.imageRef" (list .Values.sidecarInjection.image .) }}
{{- else }}
{{- include "toolgate.image" . }}
{{- end }}
{{- end }}

{{- define "toolgate.webhookServiceName" -}}
{{- printf "%s-webhook" (include "toolgate.fullname" .) }}
{{- end }}

{{/* The Service in front of the reports endpoint (the leader only). */}}
{{- define "toolgate.reportsServiceName" -}}
{{- printf "%s-reports" (include "toolgate.fullname" .) }}
{{- end }}

{{- define "toolgate.webhookSecretName" -}}
{{- printf "%s-webhook-certs" (include "toolgate.fullname" .) }}
{{- end }}

{{- define "toolgate.validatingWebhookName" -}}
{{- printf "%s-validating-webhook" (include "toolgate.fullname" .) }}
{{- end }}

{{- define "toolgate.mutatingWebhookName" -}}
{{- printf "%s-mutating-webhook" (include "toolgate.fullname" .) }}
{{- end }}

{{- define "toolgate.certificateName" -}}
{{- printf "%s-webhook" (include "toolgate.fullname" .) }}
{{- end }}

{{/* The chart creates a self-signed Issuer unless one is named. */}}
{{- define "toolgate.issuerRef" -}}
{{- if .Values.certManager.issuerRef.name }}
name: {{ .Values.certManager.issuerRef.name }}
kind: {{ .Values.certManager.issuerRef.kind }}
group: {{ .Values.certManager.issuerRef.group }}
{{- else }}
name: {{ include "toolgate.fullname" . }}-selfsigned
kind: Issuer
group: cert-manager.io
{{- end }}
{{- end }}

{{/* Self mode: the manager issues its own certificates and injects the CA. */}}
{{- define "toolgate.selfManagedCerts" -}}
{{- if not .Values.certManager.enabled }}true{{ end }}
{{- end }}
