package crdschema

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// TestValidateAgentAndMCPUpstream: the Agent and MCPUpstream schemas refuse
// what would let a value travel where it must not (a role or agent id with
// characters kubelet would expand in the sidecar's arguments, an upstream
// URL that is not http(s) or carries credentials), each with a message
// naming the field, before the API server stores it.
func TestValidateAgentAndMCPUpstream(t *testing.T) {
	tests := []struct {
		name, doc string
		want      []string
		message   string
	}{
		{"valid agent", `{apiVersion: toolgate.dev/v1alpha1, kind: Agent, metadata: {name: billing, namespace: d},
spec: {serviceAccountName: billing-bot, agentId: billing-bot-7, roles: [reader, payments], upstreams: [github]}}`, nil, ""},
		{"agent without serviceAccountName", `{apiVersion: toolgate.dev/v1alpha1, kind: Agent, metadata: {name: a, namespace: d}, spec: {roles: [r]}}`,
			[]string{"spec.serviceAccountName Required value"}, ""},
		{"agent fields kubelet would expand or that are no names", `{apiVersion: toolgate.dev/v1alpha1, kind: Agent, metadata: {name: a, namespace: d},
spec: {serviceAccountName: Bad_SA, agentId: "$(HOME)", roles: ["a,b", r, r], upstreams: [Git/Hub]}}`,
			[]string{"spec.agentId Invalid value", "spec.roles[0] Invalid value", "spec.roles[2] Duplicate value", "spec.serviceAccountName Invalid value", "spec.upstreams[0] Invalid value"}, ""},
		{"valid upstream", `{apiVersion: toolgate.dev/v1alpha1, kind: MCPUpstream, metadata: {name: github, namespace: d},
spec: {url: "https://api.githubcopilot.com/mcp/", credentialSecretRef: {name: github-token}}}`, nil, ""},
		{"upstream not http", `{apiVersion: toolgate.dev/v1alpha1, kind: MCPUpstream, metadata: {name: u, namespace: d}, spec: {url: "file:///etc/passwd"}}`,
			[]string{"spec Invalid value"}, "url must be an absolute http or https URL"},
		{"upstream relative", `{apiVersion: toolgate.dev/v1alpha1, kind: MCPUpstream, metadata: {name: u, namespace: d}, spec: {url: "/mcp"}}`,
			[]string{"spec Invalid value"}, "url must be an absolute http or https URL"},
		{"upstream with credentials", `{apiVersion: toolgate.dev/v1alpha1, kind: MCPUpstream, metadata: {name: u, namespace: d}, spec: {url: "https://user:pw@example.com/mcp"}}`,
			[]string{"spec Invalid value"}, "must not hold credentials"},
		{"upstream secret key", `{apiVersion: toolgate.dev/v1alpha1, kind: MCPUpstream, metadata: {name: u, namespace: d},
spec: {url: "http://mcp:8080/mcp", credentialSecretRef: {name: s, key: "../x"}}}`, []string{"spec.credentialSecretRef.key Invalid value"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := object(t, tt.doc)
			if _, err := Decode(u); err != nil {
				t.Fatal(err)
			}
			if err := PrepareForCreate(u); err != nil {
				t.Fatal(err)
			}
			errs := Validate(context.Background(), u)
			if got := fields(errs); !slices.Equal(got, tt.want) {
				t.Errorf("errors %q, want %q\n%s", got, tt.want, errs.ToAggregate())
			}
			if tt.message != "" && (errs.ToAggregate() == nil || !strings.Contains(errs.ToAggregate().Error(), tt.message)) {
				t.Errorf("errors %v, want the message %q", errs.ToAggregate(), tt.message)
			}
		})
	}
}
