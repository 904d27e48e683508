package crdschema

import (
	"context"
	"fmt"
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

// TestMCPUpstreamPins: pins are tool names as MCP writes them mapped to 64
// lower-case hex digits, at most 512 of them; pinning is strict or warn
// and needs pins. Each malformed spec is refused saying which field and
// why.
func TestMCPUpstreamPins(t *testing.T) {
	t.Parallel()
	digest := strings.Repeat("0a", 32)
	many := make([]string, 513)
	for i := range many {
		many[i] = fmt.Sprintf("t%d: %s", i, digest)
	}
	for spec, want := range map[string]string{
		`{pinnedTools: {read_file: ` + digest + `, a.b-C_9: ` + digest + `}}`: "",
		`{pinnedTools: {read_file: ` + digest + `}, pinning: warn}`:           "",
		`{pinnedTools: {read_file: ` + digest + `}, pinning: strict}`:         "",
		`{pinnedTools: {read_file: ` + strings.ToUpper(digest) + `}}`:         "spec.pinnedTools.read_file: Invalid value",
		`{pinnedTools: {read_file: "sha256:` + digest[7:] + `"}}`:             "spec.pinnedTools.read_file: Invalid value",
		`{pinnedTools: {read_file: abc}}`:                                     "spec.pinnedTools.read_file: Invalid value",
		`{pinnedTools: {read_file: 5}}`:                                       "spec.pinnedTools.read_file: Invalid value",
		`{pinnedTools: {"a/b": ` + digest + `}}`:                              "a tool name must be 1-128",
		`{pinnedTools: {"` + strings.Repeat("n", 129) + `": ` + digest + `}}`: "a tool name must be 1-128",
		`{pinnedTools: {}}`: "spec.pinnedTools: Invalid value",
		`{pinnedTools: {` + strings.Join(many, ", ") + `}}`:          "Too many",
		`{pinnedTools: {read_file: ` + digest + `}, pinning: loose}`: `spec.pinning: Unsupported value: "loose"`,
		`{pinning: warn}`: "pinning needs pinnedTools",
	} {
		u := object(t, `{apiVersion: toolgate.dev/v1alpha1, kind: MCPUpstream, metadata: {name: u, namespace: d}, spec: `+
			strings.Replace(spec, "{", "{url: 'https://mcp.example/mcp', ", 1)+`}`)
		errs := Validate(context.Background(), u)
		switch {
		case want == "" && len(errs) > 0:
			t.Errorf("%.80s: refused: %v", spec, errs)
		case want != "" && (len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), want)):
			t.Errorf("%.80s: %v, want an error saying %q", spec, errs, want)
		}
	}
}
