package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/toolgate/toolgate/engine"
)

// outcome is what one in-process run of the CLI produced.
type outcome struct {
	code           int
	stdout, stderr string
}

// run executes the toolgate command in process, as main does.
func run(t *testing.T, stdin string, args ...string) outcome {
	t.Helper()
	root := NewRootCommand()
	var out, errb bytes.Buffer
	root.SetArgs(args)
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&errb)
	code := Execute(root)
	return outcome{code: code, stdout: out.String(), stderr: errb.String()}
}

// oneResult decodes stdout, failing unless it is exactly one JSON object
// followed by a newline.
func oneResult(t *testing.T, o outcome) engine.Result {
	t.Helper()
	if o.code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", o.code, o.stderr)
	}
	if !strings.HasSuffix(o.stdout, "}\n") || strings.Count(o.stdout, "\n") != 1 {
		t.Fatalf("stdout is not one JSON line: %q", o.stdout)
	}
	dec := json.NewDecoder(strings.NewReader(o.stdout))
	var obj map[string]json.RawMessage
	if err := dec.Decode(&obj); err != nil {
		t.Fatalf("stdout is not a JSON object: %v\n%s", err, o.stdout)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		t.Fatalf("stdout has more than one JSON value: %q", o.stdout)
	}
	var res engine.Result
	if err := json.Unmarshal([]byte(o.stdout), &res); err != nil {
		t.Fatal(err)
	}
	if res.Decision != engine.Allow && res.Decision != engine.Deny && res.Decision != engine.Ask {
		t.Fatalf("decision %q", res.Decision)
	}
	return res
}

const denyBashPolicy = `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata:
  name: no-bash%s
spec:
  rules:
  - id: deny-bash
    description: no shell
    effect: deny
    conditions:
    - {field: tool_name, operator: eq, value: Bash}
`

const frozenAgent = `apiVersion: toolgate.dev/v1alpha1
kind: FrozenAgent
metadata: {name: freeze-a7}
spec:
  agentId: agent-7
  reason: incident 42
  expiresAt: "2030-01-01T00:00:00Z"
`

// binary is cmd/toolgate, built once per test binary (with a version stamp)
// for the tests that run it as a real process.
var binary struct {
	once sync.Once
	path string
	err  error
}

func toolgateBinary(t *testing.T) string {
	t.Helper()
	binary.once.Do(func() {
		dir, err := os.MkdirTemp("", "toolgate-bin")
		if err != nil {
			binary.err = err
			return
		}
		binary.path = filepath.Join(dir, "toolgate")
		goTool, err := exec.LookPath("go")
		if err != nil {
			binary.err = fmt.Errorf("the go command is needed to build the binary: %w", err)
			return
		}
		build := exec.Command(goTool, "build", "-o", binary.path,
			"-ldflags", "-X github.com/toolgate/toolgate/cli.Version=v9.8.7 -X github.com/toolgate/toolgate/cli.Commit=abc123",
			"../cmd/toolgate")
		if out, err := build.CombinedOutput(); err != nil {
			binary.err = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

// runBinary runs the built binary as a process: stdin given, env added to
// the test's environment; the exit code is the process's.
func runBinary(t *testing.T, stdin string, env []string, args ...string) outcome {
	t.Helper()
	cmd := exec.Command(toolgateBinary(t), args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running %v: %v", args, err)
	}
	return outcome{code: code, stdout: out.String(), stderr: errb.String()}
}
