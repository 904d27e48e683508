package manifest

import (
	"path/filepath"
	"strings"
	"testing"
)

const policyYAML = `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata:
  name: %s
spec:
  rules:
  - id: r1
    effect: deny
    conditions:
    - {field: tool_name, operator: eq, value: Bash}
`

// errorLines returns the loader's errors, one per line, with dir made
// relative so expectations read like what a user sees.
func errorLines(t *testing.T, err error, dir string) []string {
	t.Helper()
	if err == nil {
		return nil
	}
	es, ok := err.(Errors)
	if !ok {
		t.Fatalf("error is %T, want manifest.Errors: %v", err, err)
	}
	var out []string
	for _, e := range es {
		line := e.Error()
		if dir != "" {
			line = strings.ReplaceAll(line, dir+string(filepath.Separator), "")
		}
		out = append(out, line)
	}
	return out
}
