package local_test

import (
	"context"
	"fmt"
	"log"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/client/local"
)

// An agent without a sidecar decides in process from the sample policies;
// with one, client.New(client.Options{}) finds it and the calls are the
// same.
func Example() {
	var guard client.Evaluator
	guard, err := local.New(local.Options{BundlePath: "../../config/samples"})
	if err != nil {
		log.Fatal(err)
	}
	for _, cmd := range []string{"ls -la", "rm -rf /"} {
		res, err := guard.Evaluate(context.Background(), client.Request{
			ToolName: "Bash", AgentID: "coder-1", SessionID: "s-1",
			Input: map[string]any{"command": cmd},
		})
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s: %s %s\n", cmd, res.Decision, res.MatchedRuleID)
	}
	// Output:
	// ls -la: allow read-only-shell
	// rm -rf /: deny no-rm-rf
}
