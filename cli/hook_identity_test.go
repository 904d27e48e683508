package cli

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// rolesPolicy allows Glob to readers only, in manifests that register the
// agent billing (ServiceAccount billing-bot, role reader).
const rolesPolicy = `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: readers}
spec:
  defaultEffect: deny
  rules:
  - id: readers-glob
    effect: allow
    conditions:
    - {field: tool_name, operator: eq, value: Glob}
    - {field: roles, operator: contains, value: reader}
---
apiVersion: toolgate.dev/v1alpha1
kind: Agent
metadata: {name: billing}
spec: {serviceAccountName: billing-bot, roles: [reader]}
`

// TestHookLocalModeDecidesAsTheRegisteredAgent: the hook's local mode, on
// manifests that register agents, decides as the sidecar would for
// --service-account: the Agent's roles bind, and without a registered
// ServiceAccount every call is AGENT_UNREGISTERED. --service-account
// without --bundle-dir is a usage error.
func TestHookLocalModeDecidesAsTheRegisteredAgent(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"p.yaml": rolesPolicy})
	if d := hookDecisionOf(t, run(t, globEvent, "hook", "claude-code", "--bundle-dir", dir, "--service-account", "billing-bot")); d.PermissionDecision != "allow" {
		t.Errorf("as billing-bot (role reader): %+v", d)
	}
	d := hookDecisionOf(t, run(t, globEvent, "hook", "claude-code", "--bundle-dir", dir))
	if d.PermissionDecision != "deny" || !strings.Contains(d.PermissionDecisionReason, "AGENT_UNREGISTERED") {
		t.Errorf("as no ServiceAccount: %+v, want deny AGENT_UNREGISTERED", d)
	}
	if out := run(t, globEvent, "hook", "claude-code", "--service-account", "billing-bot"); out.code != 2 || !strings.Contains(out.stderr, "only used with --bundle-dir") {
		t.Errorf("--service-account without --bundle-dir: exit %d, %q", out.code, out.stderr)
	}
}
