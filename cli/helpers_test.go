package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
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
	if res.Decision != engine.Allow && res.Decision != engine.Deny {
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
