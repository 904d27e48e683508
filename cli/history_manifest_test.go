package cli

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
)

const payLimitPolicy = `apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: pay-limit}
spec:
  rules:
  - id: pay-hourly
    effect: deny
    description: at most 10 pay calls an hour
    targets: {tools: [pay]}
    when: {rateLimit: {max: 10, window: 1h, per: agent}}
`

// TestEvalHistoryDecidesARateLimit: the whole command, from a Policy
// manifest with a rateLimit and a history file, decides as a sidecar that
// had allowed those calls.
func TestEvalHistoryDecidesARateLimit(t *testing.T) {
	now, _ := time.Parse(time.RFC3339, historyNow)
	dir := testenv.WriteTree(t, map[string]string{"p.yaml": payLimitPolicy, "req.json": `{"tool_name":"pay","agent_id":"bot"}`,
		"nine.json": payHistory(9, now), "ten.json": payHistory(10, now), "old.json": payHistory(10, now.Add(-time.Hour))})
	p := func(name string) string { return filepath.Join(dir, name) }
	for _, tc := range []struct {
		history string
		want    engine.Decision
	}{{"nine.json", engine.Allow}, {"ten.json", engine.Deny}, {"old.json", engine.Allow}} {
		res := oneResult(t, run(t, "", "eval", "-f", p("p.yaml"), "--request", p("req.json"), "--history", p(tc.history), "--now", historyNow))
		if res.Decision != tc.want {
			t.Errorf("--history %s: %+v, want %s", tc.history, res, tc.want)
		}
	}
	// Without a history nothing was allowed before.
	if res := oneResult(t, run(t, "", "eval", "-f", p("p.yaml"), "--request", p("req.json"), "--now", historyNow)); res.Decision != engine.Allow {
		t.Errorf("without --history: %+v", res)
	}
}
