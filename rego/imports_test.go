package rego

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The exporter depends on the engine and the standard library only: never
// Kubernetes, never OPA (test/regodiff, a module of its own, runs OPA).
func TestRegoImportsNoKubernetesNorOPA(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, banned := range []string{"k8s.io/", "sigs.k8s.io/", "github.com/open-policy-agent/opa"} {
			if strings.HasPrefix(pkg, banned) {
				t.Errorf("rego depends on %s", pkg)
			}
		}
	}
	if strings.Contains(string(mustRead(t, "../go.mod")), "github.com/open-policy-agent/opa ") {
		t.Error("OPA is in toolgate's go.mod: it belongs in test/regodiff/go.mod")
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
