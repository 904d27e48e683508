package client_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/client/internal/clienttest"
	"github.com/toolgate/toolgate/client/local"
	"github.com/toolgate/toolgate/engine"
)

// resultPolicies are the result rules every client's tests judge with.
var resultPolicies = filepath.Join("..", "clients", "testdata", "results.yaml")

const awsKeyID = "AKIAIOSFODNN7EXAMPLE"

// TestEvaluateResult judges tool outputs through the sidecar (TCP and its
// socket) and in process, which must answer alike.
func TestEvaluateResult(t *testing.T) {
	bundle := clienttest.BundleOf(t, resultPolicies)
	sc := clienttest.StartSidecar(t, bundle, nil)
	in, err := local.New(local.Options{BundlePath: bundle})
	if err != nil {
		t.Fatal(err)
	}
	judges := map[string]client.ResultEvaluator{
		"tcp":   clienttest.NewClient(t, client.Options{URL: sc.TCP}),
		"unix":  clienttest.NewClient(t, client.Options{URL: sc.Unix}),
		"local": in,
	}
	read := client.Request{ToolName: "read_file", Input: map[string]any{"path": "/creds"}, Framework: "go"}
	for name, j := range judges {
		t.Run(name, func(t *testing.T) {
			judge := func(req client.Request, out any) client.Result {
				t.Helper()
				res, err := j.EvaluateResult(context.Background(), req, out)
				if err != nil {
					t.Fatalf("EvaluateResult(%v): %v", out, err)
				}
				return res
			}
			res := judge(read, "aws_access_key_id = "+awsKeyID+"\n")
			if !res.Allowed() || !res.Redacted() || res.MatchedRuleID != "aws-key" {
				t.Fatalf("a key in a string output: %+v, want allow, redacted by aws-key", res)
			}
			if want := "aws_access_key_id = " + engine.RedactionMark("aws-key") + "\n"; res.RedactedText() != want {
				t.Errorf("RedactedText() = %q, want %q", res.RedactedText(), want)
			}
			if len(res.Redactions) != 1 || len(res.Explanations) == 0 {
				t.Errorf("redactions %+v, explanations %+v: want one redaction and the rules' explanations", res.Redactions, res.Explanations)
			}

			// A structured output is judged on its fields and its JSON text.
			res = judge(client.Request{ToolName: "query"}, map[string]any{"count": 500, "rows": []any{}})
			if res.Allowed() || res.MatchedRuleID != "too-many-rows" || !strings.Contains(res.Reason, "at most 100 rows") {
				t.Errorf("500 rows: %+v, want deny by too-many-rows", res)
			}
			res = judge(client.Request{ToolName: "query"}, map[string]any{"count": 2, "rows": []any{map[string]any{"key": awsKeyID}}})
			if !res.Redacted() || strings.Contains(res.RedactedText(), awsKeyID) {
				t.Errorf("a key in a structured output: %+v, want its JSON text redacted", res)
			}

			res = judge(read, "CONFIDENTIAL: the merger")
			if res.Allowed() || res.MatchedRuleID != "confidential" || res.Output != nil {
				t.Errorf("a confidential output: %+v, want deny by confidential and no output", res)
			}
			res = judge(read, "hello")
			if !res.Allowed() || res.Redacted() || res.Output != nil {
				t.Errorf("a plain output: %+v, want allow as it is", res)
			}
		})
	}
}

func TestEvaluateResultRefusesWhatCannotBeJudged(t *testing.T) {
	sc := clienttest.StartSidecar(t, clienttest.SampleBundle(t), nil)
	c := clienttest.NewClient(t, client.Options{URL: sc.Unix})
	for _, tc := range []struct {
		name string
		req  client.Request
		out  any
		want string
	}{
		{"no tool name", client.Request{}, "x", "Request.ToolName is empty"},
		{"a wait", client.Request{ToolName: "read_file", Wait: 1}, "x", "Wait and Request.Approval are for a call's approval"},
		{"an approval", client.Request{ToolName: "read_file", Approval: "req-1"}, "x", "a result is judged after the tool ran"},
		{"an output that is not JSON", client.Request{ToolName: "read_file"}, make(chan int), "does not encode as JSON"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := c.EvaluateResult(context.Background(), tc.req, tc.out)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
			if res.Allowed() {
				t.Errorf("a result that could not be judged was allowed: %+v", res)
			}
		})
	}
}

// An output past the sidecar's request limit is refused (400): a deny,
// never the output let through unjudged.
func TestEvaluateResultFailsClosed(t *testing.T) {
	sc := clienttest.StartSidecar(t, clienttest.SampleBundle(t), nil)
	c := clienttest.NewClient(t, client.Options{URL: sc.TCP})
	res, err := c.EvaluateResult(context.Background(), client.Request{ToolName: "read_file"}, strings.Repeat("x", 2<<20))
	if err != nil || res.Allowed() || res.Code != client.CodeSidecarUnavailable || !strings.Contains(res.Reason, "status 400") {
		t.Errorf("a 2 MiB output: %+v, %v; want deny SIDECAR_UNAVAILABLE naming the 400", res, err)
	}
	sc.Stop()
	res, err = c.EvaluateResult(context.Background(), client.Request{ToolName: "read_file"}, "hello")
	if err != nil || res.Allowed() || res.Code != client.CodeSidecarUnavailable {
		t.Errorf("a stopped sidecar: %+v, %v; want deny SIDECAR_UNAVAILABLE", res, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if res, err = c.EvaluateResult(ctx, client.Request{ToolName: "read_file"}, "hello"); !errors.Is(err, context.Canceled) || res.Allowed() {
		t.Errorf("a cancelled context: %+v, %v; want deny and context.Canceled", res, err)
	}
}
