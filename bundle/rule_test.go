package bundle

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/engine"
)

// issueRule is the rule of issue 9's reference, every new field used.
const issueRule = `
apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: gateway, generation: 4}
spec:
  evaluation: tiered
  rules:
  - id: build-agent-may-run-bash
    priority: 100
    effect: allow
    subjects: {agents: [build-agent], roles: [ci]}
    targets:
      servers: [github]
      tools: [Bash]
      resources: [{type: table, names: [orders, invoices]}]
    select: {action: [call], sideEffect: [write, delete], tool: '/^mcp__github__/', resourceType: table, context: {region: eu, tier: 2}}
    when:
      schedule: [{days: [mon, tue, wed, thu, fri], from: "08:00", to: "18:00", timeZone: Europe/Berlin}, {from: "22:00", to: "02:00"}]
      environments: [prod]
      sensitivity: [pii]
      actorConfidence: [verified]
      rateLimit: {max: 10, window: 1h, per: agent}
      tokenBudget: {max: 200000, window: 24h}
    conditions:
    - {field: input.command, operator: not_contains, value: "rm -rf"}
    - any:
      - {field: kwargs.amount, operator: lte, value: 1000}
      - all: [{field: agent_id, operator: eq, value: cfo-bot}, {field: kwargs.currency, operator: in, values: [EUR, USD]}]
  - id: warn-writes
    priority: -5
    effect: warn
  - id: audit-all
    effect: audit
`

// The engine's JSON of the converted rules: what the bundle publishes.
const issueRuleBundle = `[{"id":"build-agent-may-run-bash","priority":100,"effect":"allow",` +
	`"subjects":{"agents":["build-agent"],"roles":["ci"]},` +
	`"targets":{"servers":["github"],"tools":["Bash"],"resources":[{"type":"table","names":["orders","invoices"]}]},` +
	`"select":{"action":["call"],"sideEffect":["write","delete"],"tool":"/^mcp__github__/","resourceType":"table","context":{"region":"eu","tier":2}},` +
	`"when":{"schedule":[{"days":["mon","tue","wed","thu","fri"],"from":"08:00","to":"18:00","timeZone":"Europe/Berlin"},{"from":"22:00","to":"02:00"}],` +
	`"environments":["prod"],"sensitivity":["pii"],"actorConfidence":["verified"],` +
	`"rateLimit":{"max":10,"window":"1h","per":"agent"},"tokenBudget":{"max":200000,"window":"24h"}},` +
	`"conditions":[{"field":"input.command","operator":"not_contains","value":"rm -rf"},` +
	`{"any":[{"field":"kwargs.amount","operator":"lte","value":1000},` +
	`{"all":[{"field":"agent_id","operator":"eq","value":"cfo-bot"},{"field":"kwargs.currency","operator":"in","values":["EUR","USD"]}]}]}]},` +
	`{"id":"warn-writes","priority":-5,"effect":"warn"},{"id":"audit-all","effect":"audit"}]`

func decodePolicy(t *testing.T, doc string) *v1alpha1.Policy {
	t.Helper()
	var p v1alpha1.Policy
	if err := yaml.UnmarshalStrict([]byte(doc), &p); err != nil {
		t.Fatal(err)
	}
	return &p
}

func TestPolicyConvertsEveryGatewayField(t *testing.T) {
	t.Parallel()
	p := Policy(decodePolicy(t, issueRule))
	if p.ID != "gateway" || p.Version != 4 || p.Evaluation != engine.EvaluationTiered {
		t.Errorf("policy %q version %d evaluation %q", p.ID, p.Version, p.Evaluation)
	}
	if p.DefaultEffect != "deny" {
		t.Errorf("a tiered policy without defaultEffect gets %q, want deny (seed 001: zero matches is an implicit deny)", p.DefaultEffect)
	}
	got, err := json.Marshal(p.Rules)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != issueRuleBundle {
		t.Errorf("rules\n got %s\nwant %s", got, issueRuleBundle)
	}
}

// TestPolicyDefaultEffectFollowsEvaluation: the CRD has no default for
// defaultEffect, so the builder's is the one that counts; a stored allow or
// deny is kept whatever the mode.
func TestPolicyDefaultEffectFollowsEvaluation(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		evaluation v1alpha1.Evaluation
		stored     v1alpha1.Effect
		want       string
		wantEval   string
	}{
		{"", "", "allow", ""},
		{v1alpha1.EvaluationOrdered, "", "allow", ""},
		{v1alpha1.EvaluationTiered, "", "deny", "tiered"},
		{"", v1alpha1.EffectDeny, "deny", ""},
		{v1alpha1.EvaluationTiered, v1alpha1.EffectAllow, "allow", "tiered"},
	} {
		p := policy("p", 1, 0, v1alpha1.Rule{ID: "r", Effect: v1alpha1.RuleAllow})
		p.Spec.Evaluation, p.Spec.DefaultEffect = tt.evaluation, tt.stored
		got := Policy(&p)
		if got.DefaultEffect != tt.want || got.Evaluation != tt.wantEval {
			t.Errorf("evaluation %q, defaultEffect %q: got defaultEffect %q evaluation %q; want %q %q",
				tt.evaluation, tt.stored, got.DefaultEffect, got.Evaluation, tt.want, tt.wantEval)
		}
	}
}

// TestPolicyKeepsWhatIsWritten: absent filters stay absent and empty lists
// stay empty, so the engine's validation sees (and refuses) exactly what
// reached it, e.g. through `toolgate validate` with the schema skipped.
func TestPolicyKeepsWhatIsWritten(t *testing.T) {
	t.Parallel()
	p := decodePolicy(t, `
metadata: {name: p}
spec:
  rules:
  - id: empty
    effect: deny
    subjects: {agents: []}
    targets: {resources: [{type: t, names: []}]}
    select: {context: {}}
    when: {schedule: [{days: [], from: "01:00", to: "02:00"}]}
    conditions: [{any: [{all: []}]}]
  - id: plain
    effect: deny
`)
	got, err := json.Marshal(Policy(p).Rules)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"id":"empty","effect":"deny","subjects":{"agents":[]},"targets":{"resources":[{"type":"t","names":[]}]},` +
		`"select":{"context":{}},"when":{"schedule":[{"days":[],"from":"01:00","to":"02:00"}]},"conditions":[{"any":[{"all":[]}]}]},` +
		`{"id":"plain","effect":"deny"}]`
	if string(got) != want {
		t.Errorf("rules\n got %s\nwant %s", got, want)
	}
}

// TestBundleSchemaVersion: a namespace whose policies use none of issue 9's
// fields still publishes a version 1 bundle (sidecars not yet upgraded keep
// serving it in a rolling upgrade); one that uses them publishes version 2.
func TestBundleSchemaVersion(t *testing.T) {
	t.Parallel()
	plain := policy("plain", 1, 0, v1alpha1.Rule{ID: "r", Effect: v1alpha1.RuleDeny})
	ordered := plain
	ordered.Name, ordered.Spec.Evaluation = "explicitly-ordered", v1alpha1.EvaluationOrdered
	for _, tt := range []struct {
		name     string
		policies []v1alpha1.Policy
		want     string
	}{
		{"no new field", []v1alpha1.Policy{plain}, `"schemaVersion":1,`},
		{"evaluation: ordered written out", []v1alpha1.Policy{plain, ordered}, `"schemaVersion":1,`},
		{"a tiered policy", []v1alpha1.Policy{plain, *decodePolicy(t, issueRule)}, `"schemaVersion":2,`},
	} {
		doc, _, err := engine.Encode(Build(tt.policies, nil, time.Time{}))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(doc), "{"+tt.want) {
			t.Errorf("%s: bundle %.80s..., want %s", tt.name, doc, tt.want)
		}
		if _, err := engine.Decode(doc); err != nil {
			t.Errorf("%s: a sidecar of this version rejects it: %v", tt.name, err)
		}
	}
}

// An ask rule's approval reaches the bundle as written, and the bundle
// says version 5.
func TestPolicyConvertsAnAskRule(t *testing.T) {
	t.Parallel()
	p := Policy(decodePolicy(t, `
apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: payments, generation: 1}
spec:
  rules:
  - id: pay-cap
    effect: ask
    approval: {timeout: 10m}
`))
	got, err := json.Marshal(p.Rules)
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"id":"pay-cap","effect":"ask","approval":{"timeout":"10m"}}]`; string(got) != want {
		t.Errorf("rules\n got %s\nwant %s", got, want)
	}
	b := engine.Bundle{Policies: []engine.Policy{p}}
	if v := b.NeededSchemaVersion(); v != engine.SchemaVersionAsk {
		t.Errorf("schema version %d, want %d", v, engine.SchemaVersionAsk)
	}
}

// A result rule reaches the bundle with its phase, and the bundle says
// version 6; phase: call is written as nothing, so a policy that spells
// it out keeps its bundle bytes and version.
func TestPolicyConvertsAResultRule(t *testing.T) {
	t.Parallel()
	p := Policy(decodePolicy(t, `
apiVersion: toolgate.dev/v1alpha1
kind: Policy
metadata: {name: results, generation: 1}
spec:
  rules:
  - id: keys
    phase: result
    effect: redact
    conditions:
    - {field: output.text, operator: detect, values: [aws_access_key, jwt]}
  - id: plain
    phase: call
    effect: allow
`))
	got, err := json.Marshal(p.Rules)
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"id":"keys","phase":"result","effect":"redact","conditions":[{"field":"output.text","operator":"detect","values":["aws_access_key","jwt"]}]},{"id":"plain","effect":"allow"}]`; string(got) != want {
		t.Errorf("rules\n got %s\nwant %s", got, want)
	}
	b := engine.Bundle{Policies: []engine.Policy{p}}
	if v := b.NeededSchemaVersion(); v != engine.SchemaVersionResults {
		t.Errorf("schema version %d, want %d", v, engine.SchemaVersionResults)
	}
	b.Policies[0].Rules = b.Policies[0].Rules[1:]
	if v := b.NeededSchemaVersion(); v != engine.SchemaVersionOrdered {
		t.Errorf("phase: call alone needs version %d, want %d", v, engine.SchemaVersionOrdered)
	}
}
