package client

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

func goListDeps(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list %s: %v\n%s", pkg, err, out)
	}
	return strings.Fields(string(out))
}

// TestClientImportsNoKubernetes keeps the client light for the agents that
// import it: no Kubernetes package and no manifest reading, directly or
// through another package (depguard sees direct imports only, and only
// when someone runs the linter). client/local reads manifests.
func TestClientImportsNoKubernetes(t *testing.T) {
	for _, pkg := range goListDeps(t, ".") {
		if strings.HasPrefix(pkg, "k8s.io/") || strings.HasPrefix(pkg, "sigs.k8s.io/") ||
			pkg == "github.com/toolgate/toolgate/manifest" || pkg == "github.com/spf13/cobra" {
			t.Errorf("client depends on %s", pkg)
		}
	}
}

// TestClientIsNetHTTPAndTheEngineVocabulary: beyond what net/http itself
// needs (client.WithHTTPClient takes an *http.Client, so the client cannot
// need less), the client brings the request and answer vocabulary and
// nothing else: not the evaluator, whose RE2 (compiled to WebAssembly)
// would add about 0.8 MB to every agent's binary.
func TestClientIsNetHTTPAndTheEngineVocabulary(t *testing.T) {
	base := goListDeps(t, "net/http")
	var extra []string
	for _, pkg := range goListDeps(t, ".") {
		if !slices.Contains(base, pkg) {
			extra = append(extra, pkg)
		}
	}
	allowed := []string{
		"encoding", "encoding/json",
		"github.com/toolgate/toolgate/client",
		"github.com/toolgate/toolgate/endpoint",
		"github.com/toolgate/toolgate/engine/decision",
		"github.com/toolgate/toolgate/engine/internal/fastjson",
		"github.com/toolgate/toolgate/engine/internal/jsonvalue",
		"github.com/toolgate/toolgate/engine/output",
		"github.com/toolgate/toolgate/engine/request",
	}
	for _, pkg := range extra {
		if !slices.Contains(allowed, pkg) {
			t.Errorf("client depends on %s, beyond net/http and the engine's vocabulary", pkg)
		}
	}
	t.Logf("go list -deps: net/http %d packages, the client %d more: %v", len(base), len(extra), extra)
}
