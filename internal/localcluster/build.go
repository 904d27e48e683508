package localcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

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

// BuildAt builds cmd/toolgate as it was at rev into dir/name: the source
// from git archive, so the checkout is untouched.
// The measurements that compare a revision with this one (-base) use it.
func BuildAt(dir, rev, name string) error {
	src := filepath.Join(dir, "src-"+name)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	archive := exec.Command("git", "archive", "--format=tar", rev)
	archive.Dir = testenv.RepoRoot()
	extract := exec.Command("tar", "-x", "-C", src)
	pipe, err := archive.StdoutPipe()
	if err != nil {
		return err
	}
	extract.Stdin = pipe
	var stderr strings.Builder
	archive.Stderr = &stderr
	if err := extract.Start(); err != nil {
		return err
	}
	if err := archive.Run(); err != nil {
		return fmt.Errorf("git archive %s: %v: %s", rev, err, strings.TrimSpace(stderr.String()))
	}
	if err := extract.Wait(); err != nil {
		return fmt.Errorf("extracting %s: %w", rev, err)
	}
	build := exec.Command("go", "build", "-o", filepath.Join(dir, name), "./cmd/toolgate")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building toolgate at %s: %w\n%s", rev, err, out)
	}
	return nil
}
