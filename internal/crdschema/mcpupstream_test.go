package crdschema

import (
	"context"
	"strings"
	"testing"
)

// TestMCPUpstreamURL: the CRD takes only an absolute http or https URL
// with a host, as the API server's CEL rule reads it.
func TestMCPUpstreamURL(t *testing.T) {
	t.Parallel()
	for url, ok := range map[string]bool{
		"https://mcp.example:8443/mcp": true,
		"http://127.0.0.1:9000/mcp":    true,
		"http:///mcp":                  false, // no host
		"ftp://mcp.example/mcp":        false,
		"mcp.example/mcp":              false,
		"https://user:pw@mcp.example/": false,
	} {
		u := object(t, `{apiVersion: toolgate.dev/v1alpha1, kind: MCPUpstream, metadata: {name: u, namespace: d}, spec: {url: "`+url+`"}}`)
		errs := Validate(context.Background(), u)
		if ok != (len(errs) == 0) || (!ok && !strings.Contains(errs.ToAggregate().Error(), "url must")) {
			t.Errorf("url %q: %v, want accepted %v", url, errs, ok)
		}
	}
}
