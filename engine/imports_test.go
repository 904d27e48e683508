package engine

import (
	"os/exec"
	"strings"
	"testing"
)

// TestEngineImportsNoKubernetes keeps the decision engine pure: the sidecar's
// hot path and the CLI import it, and golangci-lint's depguard rule is only
// as good as whether someone runs the linter.
func TestEngineImportsNoKubernetes(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "k8s.io/") || strings.HasPrefix(pkg, "sigs.k8s.io/") {
			t.Errorf("engine depends on %s", pkg)
		}
	}
}
