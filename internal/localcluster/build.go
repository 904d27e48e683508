package localcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/toolgate/toolgate/internal/testenv"
)

// BuildToolgate compiles cmd/toolgate into dir and returns its path.
func BuildToolgate(dir string) (string, error) {
	out := filepath.Join(dir, "toolgate")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/toolgate")
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building toolgate: %w\n%s", err, b)
	}
	return out, nil
}
