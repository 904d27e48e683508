package mcptest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"

	"github.com/toolgate/toolgate/internal/testenv"
)

// The upstreams in test/upstreams are MCP servers on stacks other than Go,
// run as their own processes, for the ways those stacks read a request
// that the proxy must read the same: each prints "listening on HOST:PORT"
// and answers GET /stats with {"calls": {TOOL: N}}. Tests never skip for a
// missing runtime: without node, npm or python3 they fail, saying which.

// TSSDKServer installs test/upstreams/ts-sdk-1.24 from its lockfile (npm
// ci, only when node_modules is older than package-lock.json, as `make
// typescript-client` does) once per test binary, and returns the command
// line of its server: the official TypeScript SDK 1.24.
var TSSDKServer = sync.OnceValues(func() ([]string, error) {
	dir := filepath.Join(testenv.RepoRoot(), "test", "upstreams", "ts-sdk-1.24")
	node, err := exec.LookPath("node")
	if err != nil {
		return nil, fmt.Errorf("the TypeScript SDK upstream needs Node.js >= 20 (node is not on PATH): %w", err)
	}
	if err := npmCI(dir); err != nil {
		return nil, err
	}
	return []string{node, filepath.Join(dir, "server.mjs")}, nil
})

func npmCI(dir string) error {
	lock, err := os.Stat(filepath.Join(dir, "package-lock.json"))
	if err != nil {
		return err
	}
	if installed, err := os.Stat(filepath.Join(dir, "node_modules", ".package-lock.json")); err == nil && !installed.ModTime().Before(lock.ModTime()) {
		return nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return fmt.Errorf("installing %s needs npm (not on PATH): %w", dir, err)
	}
	cmd := exec.Command(npm, "ci", "--omit=optional", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("npm ci in %s: %w\n%s", dir, err, out)
	}
	return nil
}

// WSGIServer is the command line of test/upstreams/wsgi/server.py, an MCP
// server on the Python standard library's WSGI server (wsgiref).
var WSGIServer = sync.OnceValues(func() ([]string, error) {
	python, err := exec.LookPath("python3")
	if err != nil {
		return nil, errors.New("the WSGI upstream needs python3 (not on PATH)")
	}
	return []string{python, filepath.Join(testenv.RepoRoot(), "test", "upstreams", "wsgi", "server.py")}, nil
})
