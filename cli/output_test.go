package cli

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/exitcode"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestOutputRefusesUnknownFormat: -o takes text, json or yaml; anything else
// is a usage error (exit 2) that names the flag and the allowed values, on
// every command that has -o.
func TestOutputRefusesUnknownFormat(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"p.yaml": fmt.Sprintf(denyBashPolicy, "")})
	for _, args := range [][]string{
		{"version", "-o", "xml"},
		{"version", "--output=JSON"},
		{"version", "-o", ""},
		{"eval", "-f", dir, "--request", "-", "-o", "table"},
		{"validate", "-f", dir, "-o", "wide"},
	} {
		o := run(t, `{"tool_name":"Bash"}`, args...)
		if o.code != exitcode.Usage || o.stdout != "" ||
			!strings.Contains(o.stderr, `for "-o, --output" flag: -o must be one of text, json, yaml`) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, o.code, o.stdout, o.stderr)
		}
	}
}

func TestVersionOutputFormats(t *testing.T) {
	text := run(t, "", "version")
	if text.code != 0 || !strings.HasPrefix(text.stdout, "toolgate dev (commit dev, ") {
		t.Fatalf("text: exit %d, stdout %q", text.code, text.stdout)
	}
	want := map[string]string{"version": "dev", "commit": "dev", "goVersion": runtime.Version(), "platform": runtime.GOOS + "/" + runtime.GOARCH}
	for _, format := range []string{"json", "yaml"} {
		o := run(t, "", "version", "-o", format)
		var got map[string]string
		if err := yaml.UnmarshalStrict([]byte(o.stdout), &got); o.code != 0 || err != nil {
			t.Fatalf("%s: exit %d, %v, stdout %q", format, o.code, err, o.stdout)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %v, want %v", format, got, want)
		}
	}
	if o := run(t, "", "version", "-o", "json"); strings.Count(o.stdout, "\n") != 1 {
		t.Errorf("json is not one line: %q", o.stdout)
	}
}

// TestEvalOutputFormats: json is the result today's text prints, yaml the
// same fields.
func TestEvalOutputFormats(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"p.yaml": fmt.Sprintf(denyBashPolicy, "")})
	res := oneResult(t, run(t, `{"tool_name":"Bash"}`, "eval", "-f", dir, "--request", "-", "-o", "json"))
	if res.Decision != engine.Deny || res.MatchedRuleID != "deny-bash" {
		t.Errorf("json: %+v", res)
	}
	o := run(t, `{"tool_name":"Bash"}`, "eval", "-f", dir, "--request", "-", "-o", "yaml")
	var y engine.Result
	if err := yaml.Unmarshal([]byte(o.stdout), &y); o.code != 0 || err != nil {
		t.Fatalf("yaml: exit %d, %v, stdout %q", o.code, err, o.stdout)
	}
	if strings.HasPrefix(o.stdout, "{") || !strings.Contains(o.stdout, "matchedRuleId: deny-bash\n") ||
		y.Decision != engine.Deny || y.MatchedPolicyID != "no-bash" {
		t.Errorf("yaml: %+v\n%s", y, o.stdout)
	}
}

// printedReport is what validate -o json prints, read as a user would.
type printedReport struct {
	Valid   bool `json:"valid"`
	Objects []struct {
		Kind, Name, Namespace, File string
		Doc, Line                   int
	} `json:"objects"`
	Problems []struct {
		File, Kind, Name, Field, Message string
		Doc, Line                        int
	} `json:"problems"`
	Warnings   []json.RawMessage `json:"warnings"`
	OtherKinds map[string]int    `json:"otherKinds"`
}

// TestValidateOutputJSON lists every object checked and every problem, each
// with its file, document and line.
func TestValidateOutputJSON(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{
		"good.yaml": fmt.Sprintf(denyBashPolicy, "") + "---\n" + frozenAgent,
		"bad.yaml": "# a comment\n\napiVersion: toolgate.dev/v1alpha1\nkind: Policy\nmetadata: {name: bad}\n" +
			"spec:\n  rules:\n  - {id: r, effect: permit}\n",
	})
	for _, format := range []string{"json", "yaml"} {
		o := run(t, "", "validate", "-f", dir, "-o", format)
		var r printedReport
		if err := yaml.Unmarshal([]byte(o.stdout), &r); err != nil || o.code != exitcode.Problems {
			t.Fatalf("%s: exit %d, %v, stdout %q, stderr %q", format, o.code, err, o.stdout, o.stderr)
		}
		if r.Valid || len(r.Objects) != 2 || len(r.Problems) == 0 {
			t.Fatalf("%s: %+v", format, r)
		}
		obj := r.Objects[1]
		if obj.Kind != "FrozenAgent" || obj.Name != "freeze-a7" || obj.File != filepath.Join(dir, "good.yaml") || obj.Doc != 2 || obj.Line != 13 {
			t.Errorf("%s: object %+v", format, obj)
		}
		p := r.Problems[0]
		if p.File != filepath.Join(dir, "bad.yaml") || p.Doc != 1 || p.Line != 1 || p.Kind != "Policy" || p.Name != "bad" ||
			p.Field != "spec.rules[0].effect" || !strings.Contains(p.Message, `"permit"`) {
			t.Errorf("%s: problem %+v", format, p)
		}
	}
	o := run(t, "", "validate", "-f", filepath.Join(dir, "good.yaml"), "-o", "json")
	var r printedReport
	if err := json.Unmarshal([]byte(o.stdout), &r); err != nil || o.code != 0 || !r.Valid || r.Problems == nil || len(r.Problems) != 0 {
		t.Errorf("clean: exit %d, %v, %q", o.code, err, o.stdout)
	}
}

// TestEvalFailOnDeny: --fail-on-deny exits 1 (exitcode.Problems) on a deny,
// with the result still printed, and 0 on an allow; without it any decision
// exits 0.
func TestEvalFailOnDeny(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"p.yaml": fmt.Sprintf(denyBashPolicy, "")})
	o := run(t, `{"tool_name":"Bash"}`, "eval", "-f", dir, "--request", "-", "--fail-on-deny")
	if o.code != exitcode.Problems || !strings.Contains(o.stdout, `"decision":"deny"`) || o.stderr != "" {
		t.Errorf("deny: exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	if res := oneResult(t, run(t, `{"tool_name":"Read"}`, "eval", "-f", dir, "--request", "-", "--fail-on-deny")); res.Decision != engine.Allow {
		t.Errorf("allow: %+v", res)
	}
	if res := oneResult(t, run(t, `{"tool_name":"Bash"}`, "eval", "-f", dir, "--request", "-")); res.Decision != engine.Deny {
		t.Errorf("without the flag: %+v", res)
	}
	// Malformed input stays a usage error, not a deny.
	if o := run(t, `{"tool_name":`, "eval", "-f", dir, "--request", "-", "--fail-on-deny"); o.code != exitcode.Usage {
		t.Errorf("malformed request: exit %d, stderr %q", o.code, o.stderr)
	}
}

// mixedManifests is a `kustomize build` of an application that ships a
// Policy beside its Deployment and Service.
var mixedManifests = fmt.Sprintf(denyBashPolicy, "") + `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec: {replicas: 1}
---
apiVersion: v1
kind: Service
metadata: {name: web}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: worker}
`

// TestValidateSkipsOtherKinds: `kustomize build | toolgate validate -f -`
// checks the toolgate objects and counts the others by kind.
func TestValidateSkipsOtherKinds(t *testing.T) {
	o := run(t, mixedManifests, "validate", "-f", "-")
	want := "skipped 3 objects of other kinds: Deployment, Service\n1 Policy and 0 FrozenAgent object(s) valid\n"
	if o.code != 0 || o.stdout != "" || o.stderr != want {
		t.Errorf("exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
	o = run(t, mixedManifests, "validate", "-f", "-", "-o", "json")
	var r printedReport
	if err := json.Unmarshal([]byte(o.stdout), &r); err != nil || o.code != 0 || r.OtherKinds["Deployment"] != 2 || r.OtherKinds["Service"] != 1 {
		t.Errorf("json: exit %d, %v, %q", o.code, err, o.stdout)
	}
	// A misspelt toolgate kind is not "another kind".
	o = run(t, "apiVersion: toolgate.dev/v1alpha1\nkind: Polcy\nmetadata: {name: x}\n", "validate", "-f", "-")
	if o.code != exitcode.Problems || !strings.Contains(o.stdout, `unknown kind "Polcy"`) {
		t.Errorf("typo: exit %d, stdout %q", o.code, o.stdout)
	}
	// Malformed documents of any group are still problems, not skipped.
	o = run(t, mixedManifests+"---\napiVersion: apps/v1\nmetadata: {name: nokind}\n---\n[1, 2]\n", "validate", "-f", "-")
	if o.code != exitcode.Problems || !strings.Contains(o.stdout, "<stdin>:doc 5: kind: missing") ||
		!strings.Contains(o.stdout, "<stdin>:doc 6: must be an object") {
		t.Errorf("malformed: exit %d, stdout %q", o.code, o.stdout)
	}
}

// TestValidateStrictKindsRefusesOtherKinds: --strict-kinds keeps the old
// behaviour, a problem per object of another kind.
func TestValidateStrictKindsRefusesOtherKinds(t *testing.T) {
	o := run(t, mixedManifests, "validate", "-f", "-", "--strict-kinds")
	if o.code != exitcode.Problems || strings.Count(o.stdout, "unknown kind") != 3 ||
		!strings.Contains(o.stdout, `<stdin>:doc 2: Deployment/web: kind: unknown kind "Deployment"`) {
		t.Errorf("exit %d, stdout %q, stderr %q", o.code, o.stdout, o.stderr)
	}
}
