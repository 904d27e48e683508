package localcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/toolgate/toolgate/internal/testenv"
)

// BuildToolgate compiles cmd/toolgate into dir and returns its path.
func BuildToolgate(dir string) (string, error) { return Build(dir, "./cmd/toolgate", "toolgate") }

// Build compiles the repository's package pkg (./cmd/toolgate,
// ./test/mcpserver) into dir as name and returns its path: the one build
// the demo, the measurements and the tests that run real processes share.
func Build(dir, pkg, name string) (string, error) {
	out := filepath.Join(dir, name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building %s: %w\n%s", pkg, err, b)
	}
	return out, nil
}
