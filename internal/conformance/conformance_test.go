package conformance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLoadSamples reads the real set: every request has a case.
func TestLoadSamples(t *testing.T) {
	cases, err := Load("../../config/samples")
	if err != nil {
		t.Fatal(err)
	}
	if len(cases) < 19 {
		t.Fatalf("%d cases, want every sample request (19 or more)", len(cases))
	}
	asks, results := 0, map[string]int{}
	for _, c := range cases {
		if len(c.Body) == 0 {
			t.Errorf("%s: no body", c.Request)
		}
		if c.Asks {
			asks++
		}
		if c.Result() {
			results[c.Expect.Effect]++
		}
	}
	if asks == 0 {
		t.Error("no case asks: the samples' pay-over-cap rule (effect ask) is not in the set")
	}
	// The samples' result rules: a result redacted, one withheld, one that
	// goes on as it is.
	if results["redact"] == 0 || results["deny"] == 0 || results["allow"] == 0 {
		t.Errorf("result cases by effect %v: want redact, deny and allow", results)
	}
}

// TestOffline: an asking case is the engine's ask offline, with the policy,
// version and rule the sidecar's refusal names; any other case is itself.
func TestOffline(t *testing.T) {
	rule, policy, version, code := "pay-over-cap", "pay-cap", int64(1), CodeCannotAsk
	asked := Case{Request: "r.json", Asks: true, Expect: Expect{Decision: "deny", Effect: "deny",
		MatchedPolicyID: &policy, MatchedPolicyVersion: &version, MatchedRuleID: &rule, Code: &code}}
	if m := asked.Mismatch(Decision{"deny", "deny", policy, 1, rule, CodeCannotAsk}); m != "" {
		t.Errorf("the sidecar's refusal: %s", m)
	}
	if m := asked.Offline().Mismatch(Decision{"ask", "ask", policy, 1, rule, "APPROVAL_REQUIRED"}); m != "" {
		t.Errorf("the engine's ask: %s", m)
	}
	for _, got := range []Decision{
		{"deny", "deny", policy, 1, rule, CodeCannotAsk}, // a refusal is not the engine's answer
		{"ask", "ask", policy, 1, "other", "APPROVAL_REQUIRED"},
		{"allow", "ask", policy, 1, rule, ""},
	} {
		if asked.Offline().Mismatch(got) == "" {
			t.Errorf("%+v conforms offline, want a mismatch", got)
		}
	}
	if asked.Expect.Decision != "deny" {
		t.Error("Offline changed the case it was called on")
	}
	plain := Case{Request: "r.json", Expect: Expect{Decision: "deny", Effect: "deny", MatchedRuleID: &rule}}
	if m := plain.Offline().Mismatch(Decision{"deny", "deny", "", 0, rule, ""}); m != "" {
		t.Errorf("a case that does not ask, offline: %s", m)
	}
}

// TestLoadRefusesDrift writes broken sets: each is refused with a reason.
func TestLoadRefusesDrift(t *testing.T) {
	output := `{"tool_name":"x","output":{"text":"t"}}`
	cases := []struct{ name, set, want, body string }{
		{"not JSON", `{"cases":[`, "unexpected EOF", ""},
		{"unknown field", `{"cases":[],"extra":1}`, `unknown field "extra"`, ""},
		{"empty", `{"cases":[]}`, "has no cases", ""},
		{"missing request", `{"cases":[{"request":"a.json","expect":{"decision":"deny"}},{"request":"gone.json","expect":{"decision":"deny"}}]}`, "gone.json", ""},
		{"request without a case", `{"cases":[{"request":"b.json","expect":{"decision":"deny"}}]}`, "has no case for", ""},
		{"twice", `{"cases":[{"request":"a.json","expect":{"decision":"deny"}},{"request":"a.json","expect":{"decision":"deny"}}]}`, "listed twice", ""},
		{"bad decision", `{"cases":[{"request":"a.json","expect":{"decision":"maybe"}}]}`, `"maybe" is not allow or deny`, ""},
		{"asks, allowed", `{"cases":[{"request":"a.json","asks":true,"expect":{"decision":"allow","matchedRuleId":"r"}}]}`, "a.json asks: expect a deny APPROVAL_UNAVAILABLE", ""},
		{"asks, another code", `{"cases":[{"request":"a.json","asks":true,"expect":{"decision":"deny","matchedRuleId":"r","code":"r"}}]}`, "a.json asks: expect a deny APPROVAL_UNAVAILABLE", ""},
		{"asks, no rule", `{"cases":[{"request":"a.json","asks":true,"expect":{"decision":"deny","code":"APPROVAL_UNAVAILABLE"}}]}`, "naming the rule that asked", ""},
		{"bad now", `{"cases":[{"request":"a.json","now":"tomorrow","expect":{"decision":"deny"}}]}`, "now:", ""},
		{"output, no phase", `{"cases":[{"request":"a.json","expect":{"decision":"allow"}}]}`, `a.json: the request carries output: set "phase": "result"`, output},
		{"phase result, no output", `{"cases":[{"request":"a.json","phase":"result","expect":{"decision":"allow"}}]}`, "a.json: phase result: the request carries no output", ""},
		{"another phase", `{"cases":[{"request":"a.json","phase":"call","expect":{"decision":"allow"}}]}`, `a.json: phase "call": want "result" or none`, ""},
		{"a result asks", `{"cases":[{"request":"a.json","phase":"result","asks":true,"expect":{"decision":"deny","matchedRuleId":"r","code":"APPROVAL_UNAVAILABLE"}}]}`, "asks is for calls", output},
		{"a bad output", `{"cases":[{"request":"a.json","phase":"result","expect":{"decision":"allow"}}]}`, "output.text must be a string", `{"tool_name":"x","output":{"text":1}}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.MkdirAll(filepath.Join(dir, "requests"), 0o755); err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{"a.json", "b.json"} {
				body := `{"tool_name":"x"}`
				if c.body != "" && f == "a.json" {
					body = c.body
				}
				if err := os.WriteFile(filepath.Join(dir, "requests", f), []byte(body), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if c.name != "missing request" && c.name != "request without a case" {
				_ = os.Remove(filepath.Join(dir, "requests", "b.json"))
			}
			if err := os.WriteFile(filepath.Join(dir, File), []byte(c.set), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error containing %q", err, c.want)
			}
		})
	}
}

func TestMismatch(t *testing.T) {
	rule, policy, version := "no-rm-rf", "bash-no-rm-rf", int64(1)
	c := Case{Request: "r.json", Expect: Expect{Decision: "deny", Effect: "deny", MatchedPolicyID: &policy, MatchedPolicyVersion: &version, MatchedRuleID: &rule}}
	if m := c.Mismatch(Decision{"deny", "deny", policy, 1, rule, ""}); m != "" {
		t.Errorf("a conforming decision: %s", m)
	}
	for _, got := range []Decision{
		{"allow", "deny", policy, 1, rule, ""},
		{"deny", "warn", policy, 1, rule, ""},
		{"deny", "deny", "other", 1, rule, ""},
		{"deny", "deny", policy, 2, rule, ""},
		{"deny", "deny", policy, 1, "other", ""},
		{"deny", "deny", policy, 1, rule, "AGENT_FROZEN"},
	} {
		if c.Mismatch(got) == "" {
			t.Errorf("%+v conforms, want a mismatch", got)
		}
	}
}
