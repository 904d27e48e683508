package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestDemo runs `make demo` as a newcomer would and checks its story: the
// decisions are real answers from a sidecar fed by the operator.
func TestDemo(t *testing.T) { testDemo(t, false) }

// TestDemoWithoutKubectl: the same story with the Go client applying the
// manifests, as on a machine without kubectl.
func TestDemoWithoutKubectl(t *testing.T) { testDemo(t, true) }

func testDemo(t *testing.T, noKubectl bool) {
	var out bytes.Buffer
	if err := run(&out, false, noKubectl); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	story := out.String()
	for _, want := range []string{
		"policy.toolgate.dev/default-deny-readonly created",
		"=> ALLOW  (policy default-deny-readonly, rule read-only-shell)",
		"=> DENY  (policy bash-no-rm-rf, rule no-rm-rf)",
		"=> DENY  (policy pay-cap, rule pay-over-cap)",
		`"bad-regex" is invalid`,
		"spec.rules[0].conditions[0].value",
		"invalid or unsupported Perl syntax",
		"=> DENY AGENT_FROZEN: incident INC-7",
		"==> stopping everything",
	} {
		if !strings.Contains(story, want) {
			t.Errorf("the demo's story lacks %q", want)
		}
	}
	if strings.Count(story, "=> ALLOW") != 2 {
		t.Errorf("want ls allowed before the freeze and after the unfreeze:\n%s", story)
	}
	if t.Failed() {
		t.Log(story)
	}
}
