package local

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/client/internal/clienttest"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/scenario"
)

// BenchmarkLocalEvaluate measures in-process decisions of sample requests
// through an Evaluator ("local", the path that must not allocate) against the
// engine called directly ("engine"). The samples hold a rateLimit, so
// the Evaluator, like the sidecar, also counts each allowed call in its usage
// ledger: that is most of the difference.
// "Read" reaches no regex; "Bash" runs the samples' shell regexes, which
// are most of its time. "request" starts from a Request struct, which
// builds the request map (and allocates) per call.
func BenchmarkLocalEvaluate(b *testing.B) {
	l := newLocal(b, clienttest.Samples)
	for _, tc := range []struct{ name, file string }{{"Read", "read_file.json"}, {"Bash", "bash_ls.json"}} {
		doc, err := os.ReadFile(filepath.Join(clienttest.Samples, "requests", tc.file))
		if err != nil {
			b.Fatal(err)
		}
		req, err := engine.DecodeRequest(doc)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("local/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if res := l.EvaluateRequest(req); !res.Allowed() {
					b.Fatalf("got %+v", res)
				}
			}
		})
		b.Run("engine/"+tc.name, func(b *testing.B) {
			compiled := l.d.State().Compiled
			b.ReportAllocs()
			for b.Loop() {
				compiled.Evaluate(req, engine.EvalOptions{})
			}
		})
	}
	b.Run("request/Bash", func(b *testing.B) {
		r := client.Request{ToolName: "Bash", AgentID: "coder-1", SessionID: "s-1",
			Input: map[string]any{"command": "ls -la src/"}}
		b.ReportAllocs()
		for b.Loop() {
			if res, _ := l.Evaluate(context.Background(), r); !res.Allowed() {
				b.Fatalf("got %+v", res)
			}
		}
	})
}

// BenchmarkLocalReference is the in-process figure make measure-clients
// prints beside Python's and Node's: the FINDINGS reference scenario (1000
// rules), its rule-500 request, as a Go agent with an Evaluator decides it.
func BenchmarkLocalReference(b *testing.B) {
	doc, _, err := engine.Encode(scenario.Reference(1000))
	if err != nil {
		b.Fatal(err)
	}
	path := filepath.Join(b.TempDir(), "bundle.json")
	if err := os.WriteFile(path, doc, 0o644); err != nil {
		b.Fatal(err)
	}
	l := newLocal(b, path)
	req, err := engine.DecodeRequest([]byte(scenario.Request))
	if err != nil {
		b.Fatal(err)
	}
	if res := l.EvaluateRequest(req); res.MatchedRuleID != "r500" {
		b.Fatalf("got %+v, want a deny by r500", res)
	}
	b.ReportAllocs()
	for b.Loop() {
		l.EvaluateRequest(req)
	}
}
