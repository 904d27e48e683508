package cli

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUnstampedBinaryReportsVCSRevision builds cmd/toolgate as `go install`
// and a plain `go build` do, without -ldflags, and checks that `toolgate
// version` names the checkout's commit rather than "dev", with -dirty once
// the tree has changes. The stamped build is checked by TestBinary.
//
// The build runs in a fresh git repository holding this working tree's
// files: the go command records VCS information only where .git is a
// directory (a `git worktree`'s .git is a file, so such builds say "dev"),
// and a repository of our own lets the test see both a clean and a dirty tree.
func TestUnstampedBinaryReportsVCSRevision(t *testing.T) {
	repo := t.TempDir()
	git := func(dir string, args ...string) string {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-c", "user.name=test", "-c", "user.email=test@example.invalid", "-c", "commit.gpgsign=false"}, args...)...)
		cmd.Dir = dir
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	top := git("..", "rev-parse", "--show-toplevel")
	for _, f := range strings.Split(git(top, "ls-files", "-co", "--exclude-standard"), "\n") {
		data, err := os.ReadFile(filepath.Join(top, f))
		if os.IsNotExist(err) {
			continue // deleted in the working tree
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(repo, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(repo, f), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(repo, "init", "-q")
	git(repo, "add", "-A")
	git(repo, "commit", "-q", "-m", "snapshot")
	head := git(repo, "rev-parse", "HEAD")

	version := func() string {
		t.Helper()
		exe := filepath.Join(t.TempDir(), "toolgate")
		// -buildvcs=true is go build's default in a git checkout ("auto");
		// it is spelled out because this machine's GOFLAGS sets it false.
		build := exec.Command("go", "build", "-buildvcs=true", "-o", exe, "./cmd/toolgate")
		build.Dir = repo
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, out)
		}
		out, err := exec.Command(exe, "version").Output()
		if err != nil {
			t.Fatalf("toolgate version: %v", err)
		}
		return string(out)
	}

	clean := version()
	if !strings.Contains(clean, "(commit "+head+", committed ") {
		t.Errorf("clean tree: toolgate version = %q, want commit %s and its time", clean, head)
	}
	if !strings.HasPrefix(clean, "toolgate v0.0.0-") {
		t.Errorf("clean tree: toolgate version = %q, want the module's pseudo-version from the build info", clean)
	}

	// An untracked file is enough for go build's vcs.modified (it asks
	// `git status --porcelain`).
	if err := os.WriteFile(filepath.Join(repo, "scratch.txt"), []byte("local change\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if dirty := version(); !strings.Contains(dirty, "(commit "+head+"-dirty, committed ") {
		t.Errorf("dirty tree: toolgate version = %q, want commit %s-dirty", dirty, head)
	}
}
