package client_test

import (
	"context"
	"testing"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/client/internal/clienttest"
)

// BenchmarkClientEvaluate measures a decision asked of the real sidecar
// over its Unix socket, on a kept-alive connection.
func BenchmarkClientEvaluate(b *testing.B) {
	sc := clienttest.StartSidecar(b, clienttest.SampleBundle(b), nil)
	c := clienttest.NewClient(b, client.Options{URL: sc.Unix})
	r := client.Request{ToolName: "Bash", AgentID: "coder-1", SessionID: "s-1",
		Input: map[string]any{"command": "ls -la src/"}}
	b.ReportAllocs()
	for b.Loop() {
		if res, err := c.Evaluate(context.Background(), r); err != nil || !res.Allowed() {
			b.Fatalf("got %+v, %v", res, err)
		}
	}
}
