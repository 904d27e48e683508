package sidecar

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/engine"
)

// Issue 28: /v1/evaluate judges a tool's result when the request carries
// output. These run the sidecar as its own process, on a bundle with the
// result rules the clients' tests use (clients/testdata/results.yaml).

// resultRules redacts AWS access key ids in what a read_file returns,
// withholds any result marked CONFIDENTIAL, and denies the call of a tool
// named forbidden (a call rule, which a result never runs).
func resultRules(t *testing.T) engine.Bundle {
	t.Helper()
	var b engine.Bundle
	must(t, json.Unmarshal([]byte(`{"policies":[{"id":"results","version":1,"defaultEffect":"allow","rules":[
		{"id":"no-forbidden","effect":"deny","conditions":[{"field":"tool_name","operator":"eq","value":"forbidden"}]},
		{"id":"aws-key","phase":"result","effect":"redact","description":"AWS access key ids never reach the agent",
		 "conditions":[{"field":"output.text","operator":"matches","value":"AKIA[0-9A-Z]{16}"}]},
		{"id":"confidential","phase":"result","effect":"deny","description":"confidential documents stay in the company",
		 "conditions":[{"field":"output.text","operator":"contains","value":"CONFIDENTIAL"}]}]}]}`), &b))
	return b
}

const awsKey = "AKIAIOSFODNN7EXAMPLE"

func resultRequest(tool, text string) string {
	out, _ := json.Marshal(map[string]any{"text": text, "isError": false, "size": len(text)})
	return fmt.Sprintf(`{"tool_name":%q,"input":{"path":"/etc/creds"},"output":%s}`, tool, out)
}

func TestEvaluateJudgesAResultInTheSidecarProcess(t *testing.T) {
	p := startSidecarProc(t, "--bundle-file="+writeBundleFile(t, resultRules(t)), "--decision-log=stdout")
	c := p.client()

	text := "key=" + awsKey + "\nregion=eu-west-1"
	d := p.decide(c, resultRequest("read_file", text))
	if d.Decision != engine.Allow || d.Effect != engine.EffectRedact || d.MatchedRuleID != "aws-key" {
		t.Fatalf("a result holding an AWS key: %+v, want allow with effect redact by aws-key", d.Result)
	}
	want := "key=" + engine.RedactionMark("aws-key") + "\nregion=eu-west-1"
	if d.Output[engine.OutputText] != want {
		t.Errorf("output.text = %q, want %q", d.Output[engine.OutputText], want)
	}
	if len(d.Redactions) != 1 || d.Redactions[0].Start != 4 || d.Redactions[0].End != 4+len(awsKey) || d.Redactions[0].RuleID != "aws-key" {
		t.Errorf("redactions = %+v, want one [4,%d) by aws-key", d.Redactions, 4+len(awsKey))
	}
	if len(d.Explanations) == 0 {
		t.Errorf("a result decision without explanations: %+v", d.Result)
	}

	d = p.decide(c, resultRequest("read_file", "CONFIDENTIAL: the merger"))
	if d.Decision != engine.Deny || d.MatchedRuleID != "confidential" || !strings.Contains(d.Reason, "confidential documents") {
		t.Fatalf("a confidential result: %+v, want deny by confidential with its description", d.Result)
	}
	if d.Output != nil {
		t.Errorf("a denied result carries output %v", d.Output)
	}

	// A plain result goes on untouched, and a call rule never runs on a
	// result: the call of forbidden was decided before it ran.
	if d = p.decide(c, resultRequest("forbidden", "nothing to see")); d.Decision != engine.Allow || d.Output != nil || len(d.Redactions) != 0 {
		t.Errorf("a plain result: %+v, want allow with no output or redactions", d.Result)
	}
	if d = p.decide(c, `{"tool_name":"forbidden"}`); d.Decision != engine.Deny || d.MatchedRuleID != "no-forbidden" {
		t.Errorf("the call of forbidden: %+v, want deny by no-forbidden", d.Result)
	}
	// A call never runs result rules, even one whose input holds a key.
	if d = p.decide(c, `{"tool_name":"write_file","input":{"text":"CONFIDENTIAL `+awsKey+`"}}`); d.Decision != engine.Allow || d.Effect == engine.EffectRedact {
		t.Errorf("a call: %+v, want allow (result rules judge outputs only)", d.Result)
	}

	// The decision log says which phase, which rule, and where the
	// redaction was, never what it hid.
	var logged []map[string]any
	eventually(t, "five decision log lines", func() bool {
		logged = decisionLines(t, p.out)
		return len(logged) >= 5
	})
	first := logged[0]
	if first["phase"] != "result" || first["matched_rule_id"] != "aws-key" || first["effect"] != "redact" {
		t.Errorf("the redact decision's log line: %v, want phase result, effect redact and matched_rule_id aws-key", first)
	}
	if line, _ := json.Marshal(first); strings.Contains(string(line), awsKey) {
		t.Errorf("the decision log holds the redacted key: %s", line)
	}
	if _, ok := logged[3]["phase"]; ok {
		t.Errorf("a call's decision log line has a phase: %v", logged[3])
	}
}

// decisionLines are the JSON lines of a process's stdout.
func decisionLines(t *testing.T, out *lineBuffer) []map[string]any {
	var lines []map[string]any
	for _, l := range strings.Split(out.String(), "\n") {
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("decision log line is not JSON: %v: %s", err, l)
		}
		lines = append(lines, m)
	}
	return lines
}

func TestEvaluateRefusesAMalformedOutputWith400(t *testing.T) {
	p := startSidecarProc(t, "--bundle-file="+writeBundleFile(t, resultRules(t)), "--decision-log=none")
	c := p.client()
	for _, tc := range []struct{ name, body, want string }{
		{"output a string", `{"tool_name":"read_file","output":"AKIA"}`, "output must be an object (text, structured, isError, size), not a string"},
		{"output null", `{"tool_name":"read_file","output":null}`, "output must be an object"},
		{"output an array", `{"tool_name":"read_file","output":[1]}`, "not an array"},
		{"text a number", `{"tool_name":"read_file","output":{"text":5}}`, "output.text must be a string, not a number"},
		{"isError a string", `{"tool_name":"read_file","output":{"isError":"no"}}`, "output.isError must be a boolean, not a string"},
		{"negative size", `{"tool_name":"read_file","output":{"size":-3}}`, "output.size must be a non-negative integer (bytes), not -3"},
		{"a misspelt key", `{"tool_name":"read_file","output":{"txt":"x"}}`, `unknown output field "txt" (want text, structured, isError or size)`},
		{"a result waiting for a person", `{"tool_name":"read_file","output":{"text":"x"},"wait":"1m"}`, "wait and approval are for a call's approval"},
		{"a result naming an approval", `{"tool_name":"read_file","output":{"text":"x"},"approval":"req-1"}`, "wait and approval are for a call's approval"},
		{"no tool_name", `{"output":{"text":"x"}}`, "tool_name is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := c.Post("http://sidecar/v1/evaluate", "application/json", strings.NewReader(tc.body))
			must(t, err)
			defer resp.Body.Close()
			data, err := io.ReadAll(resp.Body)
			must(t, err)
			assertJSONError(t, resp.StatusCode, http.StatusBadRequest, data, tc.want)
		})
	}
}
