package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// limitPolicy is a Policy whose one rule denies pay past a limit with
// these fields (YAML flow mapping entries after max and window).
func limitPolicy(name, fields string) string {
	return `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: ` + name + `}
spec:
  rules:
  - id: pay-cap
    effect: deny
    targets: {tools: [pay]}
    when:
      rateLimit: {max: 10, window: 1m` + fields + `}
`
}

// TestValidateWarnsAboutWhereLimitsCount (issue 30): failOpen and a
// per-namespace limit counted by each sidecar are valid with a warning; a
// shared limit is valid without one.
func TestValidateWarnsAboutWhereLimitsCount(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{
		"open.yaml":      limitPolicy("open", ", store: shared, failOpen: true"),
		"local-ns.yaml":  limitPolicy("local-ns", ", per: namespace"),
		"shared-ns.yaml": limitPolicy("shared-ns", ", per: namespace, store: shared"),
		"agent.yaml":     limitPolicy("agent", ", store: local"),
	})
	o := run(t, "", "validate", "-f", dir)
	for _, want := range []string{
		"warning: " + filepath.Join(dir, "open.yaml") + ":doc 1: Policy/open: spec.rules[0].when.rateLimit.failOpen: failOpen lets calls through uncounted while the usage store is down",
		"warning: " + filepath.Join(dir, "local-ns.yaml") + ":doc 1: Policy/local-ns: spec.rules[0].when.rateLimit.per: per: namespace with store: local counts per sidecar: with N replicas the namespace may make N x max calls",
	} {
		if !strings.Contains(o.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, o.stderr)
		}
	}
	if o.code != 0 || strings.Count(o.stderr, "warning: ") != 2 || !strings.HasSuffix(o.stderr, "\n4 Policy and 0 FrozenAgent object(s) valid\n") {
		t.Errorf("exit %d, stderr %q; want 4 valid policies with two warnings", o.code, o.stderr)
	}
}

// TestValidateRefusesMalformedLimitStores: an unknown store or scope, and
// failOpen on a local limit, are refused naming the field.
func TestValidateRefusesMalformedLimitStores(t *testing.T) {
	for _, tc := range []struct{ name, fields, want string }{
		{"unknown-store", ", store: redis", `store`},
		{"open-local", ", failOpen: true", `failOpen is only for store: shared`},
		{"open-local-written", ", store: local, failOpen: true", `failOpen is only for store: shared`},
		{"per-pod", ", per: pod", `per`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := testenv.WriteTree(t, map[string]string{"p.yaml": limitPolicy(tc.name, tc.fields)})
			o := run(t, "", "validate", "-f", dir)
			out := o.stdout + o.stderr
			if o.code == 0 || !strings.Contains(out, "spec.rules[0].when.rateLimit") || !strings.Contains(out, tc.want) {
				t.Errorf("exit %d, output %q; want refused at spec.rules[0].when.rateLimit saying %q", o.code, out, tc.want)
			}
		})
	}
}
