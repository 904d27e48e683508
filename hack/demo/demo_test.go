package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestDemo runs `make demo` as a newcomer would and checks its story: the
// kubectl commands it prints are the ones the real kubectl ran, their output
// is kubectl's, and the decisions are real answers from a sidecar fed by the
// operator.
func TestDemo(t *testing.T) {
	kubectl, err := need("kubectl")
	if err != nil {
		t.Fatal(err)
	}
	curl, err := need("curl")
	if err != nil {
		t.Fatal(err)
	}
	// kubectl and curl on PATH are scripts that record their arguments,
	// then exec the real programs: the test sees every command the demo ran.
	shim, calls := t.TempDir(), t.TempDir()
	for name, real := range map[string]string{"kubectl": kubectl, "curl": curl} {
		script := "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '" + filepath.Join(calls, name) + "'\nexec '" + real + "' \"$@\"\n"
		if err := os.WriteFile(filepath.Join(shim, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("PATH", shim+string(os.PathListSeparator)+os.Getenv("PATH"))

	var out bytes.Buffer
	if err := run(&out, false); err != nil {
		t.Fatalf("demo failed: %v\n%s", err, out.String())
	}
	story := out.String()
	for _, want := range []string{
		// kubectl's own words.
		"namespace/demo created",
		"policy.toolgate.dev/default-deny-readonly created",
		"frozenagent.toolgate.dev/freeze-billing-bot created",
		"frozenagent.toolgate.dev/freeze-demo-agent created",
		`frozenagent.toolgate.dev "freeze-demo-agent" deleted`,
		"policy.toolgate.dev/pay-cap                 True ",
		// The webhook's message, as kubectl words an Invalid error (the
		// Go client says `Policy.toolgate.dev "bad-regex" is invalid`).
		`The Policy "bad-regex" is invalid: spec.rules[0].conditions[0].value: Invalid value: rule "no-secrets"`,
		"invalid or unsupported Perl syntax",
		// The sidecar's decisions.
		"=> ALLOW  (policy default-deny-readonly, rule read-only-shell)",
		"=> DENY  (policy bash-no-rm-rf, rule no-rm-rf)",
		// The payment over the cap: held, listed, approved with kubectl
		// patch, then allowed by the rule that asked.
		`"tool_name":"pay","wait":"2m"}'`,
		"(no answer yet: curl waits, and the sidecar has asked for a person's approval)",
		"$ kubectl get approvalrequests -n demo",
		" patched\n    curl's answer, ",
		`{"decision":"allow","effect":"ask","matchedPolicyId":"pay-cap","matchedPolicyVersion":1,"matchedRuleId":"pay-over-cap","reason":"approved by `,
		`"approval":{"name":"pay-`,
		"=> ALLOW  (policy pay-cap, rule pay-over-cap): approved by ",
		"=> DENY AGENT_FROZEN: incident INC-7",
		"ms after kubectl apply started)",
		// The MCP proxy: delete_file hidden, a read forwarded, a read under
		// /secrets/ denied on its argument, and the server's own count.
		"policy.toolgate.dev/mcp-files created",
		"=> tools: echo pay query read_file route stream",
		"=> the server answered: contents of notes.txt",
		"=> DENIED by toolgate: files-no-secrets: nothing under /secrets/ is read by agents",
		`"calls":{"read_file":1},`,
		// The stdio guard in front of the same server speaking stdio: the
		// same read forwarded, the same read denied, the same count.
		"$ toolgate mcp stdio --server files --url unix://",
		"    < {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"files-no-secrets: nothing under /secrets/ is read by agents\"}],\"isError\":true,",
		// The results step: a key in a result redacted, with the sentence
		// that says where it was; a bulk result withheld.
		"policy.toolgate.dev/results-secrets created",
		`"effect":"redact","matchedPolicyId":"results-secrets","matchedPolicyVersion":1,"matchedRuleId":"secrets-redacted"`,
		`"redactions":[{"start":39,"end":59,"policyId":"results-secrets","ruleId":"secrets-redacted"}],"output":{"text":"AWS_REGION=eu-west-1\nAWS_ACCESS_KEY_ID=[REDACTED:secrets-redacted]\n"}`,
		"=> ALLOW, REDACTED  (policy results-secrets, rule secrets-redacted): credentials never reach the agent",
		`the agent reads: "AWS_REGION=eu-west-1\nAWS_ACCESS_KEY_ID=[REDACTED:secrets-redacted]\n"`,
		"why: condition 1: output.text contains an aws_access_key at byte 39 (20 bytes)",
		"=> WITHHELD  (policy results-secrets, rule bulk-rows-withheld): a database result of more than 100 rows is withheld; narrow the query",
		"why: condition 1: output.structured.rowCount is greater than 100",
		"==> stopping everything",
	} {
		if !strings.Contains(story, want) {
			t.Errorf("the demo's story lacks %q", want)
		}
	}
	for what, n := range map[string]int{
		"=> the server answered: contents of notes.txt":                                      2,
		"=> DENIED by toolgate: files-no-secrets: nothing under /secrets/ is read by agents": 2,
		`"calls":{"read_file":1},`:                                                           2,
	} {
		if got := strings.Count(story, what); got != n {
			t.Errorf("want %q %d times (the HTTP proxy, the stdio guard), found %d", what, n, got)
		}
	}
	if strings.Count(story, "=> ALLOW") != 4 {
		t.Errorf("want ls allowed before the freeze and after the unfreeze, the approved payment and the redacted result:\n%s", story)
	}
	// The secret is in the request the demo sends, never in an answer.
	if n := strings.Count(story, "AKIAIOSFODNN7EXAMPLE"); n != 1 {
		t.Errorf("the AWS key appears %d times in the story, want once (the curl command that sends it)", n)
	}
	checkApproval(t, story)

	// Every `$ kubectl ...` printed is a command kubectl ran, in order, and
	// kubectl ran nothing the demo did not print.
	// (The shim records arguments unquoted; no argument the demo passes
	// holds a quote of its own.)
	var printed []string
	for _, l := range strings.Split(story, "\n") {
		if cmd, ok := strings.CutPrefix(l, "$ kubectl "); ok {
			printed = append(printed, strings.ReplaceAll(strings.TrimSuffix(cmd, " <<'YAML'"), "'", ""))
		}
	}
	ranBytes, err := os.ReadFile(filepath.Join(calls, "kubectl"))
	if err != nil {
		t.Fatalf("kubectl never ran: %v", err)
	}
	ran := strings.Split(strings.TrimSpace(string(ranBytes)), "\n")
	if !slices.Equal(printed, ran) {
		t.Errorf("the demo printed\n  kubectl %s\nbut ran\n  kubectl %s", strings.Join(printed, "\n  kubectl "), strings.Join(ran, "\n  kubectl "))
	}

	// The same for curl (the shim records arguments unquoted), and each
	// answer printed is the sidecar's own JSON, not a summary.
	var asked []string
	for _, l := range strings.Split(story, "\n") {
		if cmd, ok := strings.CutPrefix(l, "$ curl "); ok {
			asked = append(asked, strings.ReplaceAll(cmd, "'", ""))
		}
	}
	curlBytes, err := os.ReadFile(filepath.Join(calls, "curl"))
	if err != nil {
		t.Fatalf("curl never ran: %v", err)
	}
	if curled := strings.Split(strings.TrimSpace(string(curlBytes)), "\n"); len(asked) != 12 || !slices.Equal(asked, curled) {
		t.Errorf("the demo printed 12 curl commands?\n  curl %s\nand ran\n  curl %s", strings.Join(asked, "\n  curl "), strings.Join(curled, "\n  curl "))
	}
	// Seven /v1/evaluate answers (two of them results), and the MCP
	// denies' decision objects (the HTTP proxy's, the stdio guard's).
	if n := strings.Count(story, `"bundleRevision":"sha256:`); n != 9 {
		t.Errorf("want the sidecar's 9 decisions printed, found %d", n)
	}
	if t.Failed() {
		t.Log(story)
	}
}

// checkApproval: the approval step printed the ApprovalRequest the sidecar
// made, approved that one in the name kubectl auth whoami gave, before
// curl answered; and the request ends Approved in the last listing.
func checkApproval(t *testing.T, story string) {
	t.Helper()
	listed := regexp.MustCompile(`\$ kubectl get approvalrequests -n demo\n +NAME +AGENT +TOOL +DECISION +AGE +EXPIRES\n +(pay-[a-z0-9]+) +demo-agent +pay +\d+s `).FindStringSubmatch(story)
	user := regexp.MustCompile(`\$ kubectl auth whoami -o 'jsonpath=\{\.status\.userInfo\.username\}'\n    (\S+)\n`).FindStringSubmatch(story)
	if listed == nil || user == nil {
		t.Errorf("the approval step lacks the pending request listed (%v) or the approver's name (%v)", listed, user)
		return
	}
	name := listed[1]
	patch := "$ kubectl patch approvalrequest " + name + ` -n demo --subresource=status --type=merge -p '{"status":{"decision":"Approved","decidedBy":"` + user[1] + `",`
	answered := strings.Index(story, "curl's answer, ")
	if at := strings.Index(story, patch); at < 0 || answered < at {
		t.Errorf("want %q printed (and run) before curl's answer", patch)
	}
	for _, want := range []string{
		`"reason":"approved by ` + user[1] + `: invoice 2026-118, checked"`,
		`"approval":{"name":"` + name + `","namespace":"demo",`,
	} {
		if !strings.Contains(story, want) {
			t.Errorf("curl's answer lacks %q", want)
		}
	}
	if !regexp.MustCompile(`approvalrequest\.toolgate\.dev/` + name + ` +demo-agent +pay +Approved `).MatchString(story) {
		t.Errorf("the last listing does not show %s Approved", name)
	}
}

// TestDemoNeedsKubectl: without kubectl the demo stops at once and says how
// to install it.
func TestDemoNeedsKubectl(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	if _, err := exec.LookPath("kubectl"); err == nil {
		t.Fatal("kubectl still found")
	}
	err := run(io.Discard, false)
	if err == nil || !strings.Contains(err.Error(), "apt-get install kubectl") {
		t.Fatalf("want an error saying how to install kubectl, got %v", err)
	}
}
