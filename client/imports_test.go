package client

import (
	"os/exec"
	"strings"
	"testing"
)

// TestClientImportsNoKubernetes keeps the client light for the agents that
// import it: no Kubernetes package and no manifest reading, directly or
// through another package (depguard sees direct imports only, and only
// when someone runs the linter). client/local reads manifests.
func TestClientImportsNoKubernetes(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "k8s.io/") || strings.HasPrefix(pkg, "sigs.k8s.io/") ||
			pkg == "github.com/toolgate/toolgate/manifest" || pkg == "github.com/spf13/cobra" {
			t.Errorf("client depends on %s", pkg)
		}
	}
}
