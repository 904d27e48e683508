package bundle

import (
	"os"
	"slices"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/toolgate/toolgate/engine"
)

func policyCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinitionVersion {
	t.Helper()
	doc, err := os.ReadFile("../config/crd/bases/toolgate.dev_policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(doc, &crd); err != nil {
		t.Fatal(err)
	}
	return &crd.Spec.Versions[0]
}

func enumOf(s apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	for _, v := range s.Enum {
		out = append(out, string(v.Raw[1:len(v.Raw)-1]))
	}
	return out
}

// TestCRDGatewaySchemaMatchesEngine keeps what the schema allows and what
// the engine knows in step: the rule effects and evaluation modes, the
// operators at every condition level, and no CRD default for defaultEffect
// (the builder's depends on evaluation).
func TestCRDGatewaySchemaMatchesEngine(t *testing.T) {
	t.Parallel()
	v := policyCRD(t)
	spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
	rule := spec.Properties["rules"].Items.Schema
	if got, want := enumOf(rule.Properties["effect"]), []string{string(engine.EffectAllow), string(engine.EffectDeny),
		string(engine.EffectWarn), string(engine.EffectAudit), string(engine.EffectAsk), string(engine.EffectRedact)}; !slices.Equal(got, want) {
		t.Errorf("rule effect enum %v, want %v", got, want)
	}
	if got, want := enumOf(rule.Properties["phase"]), []string{string(engine.PhaseCall), string(engine.PhaseResult)}; !slices.Equal(got, want) {
		t.Errorf("rule phase enum %v, want %v", got, want)
	}
	if got, want := enumOf(spec.Properties["evaluation"]), []string{engine.EvaluationOrdered, engine.EvaluationTiered}; !slices.Equal(got, want) {
		t.Errorf("evaluation enum %v, want %v", got, want)
	}
	if got := enumOf(spec.Properties["defaultEffect"]); !slices.Equal(got, []string{"allow", "deny"}) {
		t.Errorf("defaultEffect enum %v", got)
	}
	if d := spec.Properties["defaultEffect"].Default; d != nil {
		t.Errorf("defaultEffect has the CRD default %s: a tiered policy's default would be allow", d.Raw)
	}
	cond := rule.Properties["conditions"].Items.Schema
	anyMember := cond.Properties["any"].Items.Schema
	leaf := anyMember.Properties["all"].Items.Schema
	for name, s := range map[string]*apiextensionsv1.JSONSchemaProps{"condition": cond, "member of any": anyMember, "test in all": leaf} {
		if got := enumOf(s.Properties["operator"]); !slices.Equal(got, engine.Operators) {
			t.Errorf("%s: operator enum %v, want the engine's %v", name, got, engine.Operators)
		}
	}
	// kubectl get policies shows both: Mode is Enforce or Audit (shadow
	// mode), Evaluation ordered or tiered.
	var mode, evaluation bool
	for _, c := range v.AdditionalPrinterColumns {
		mode = mode || (c.Name == "Mode" && c.JSONPath == ".spec.mode")
		evaluation = evaluation || (c.Name == "Evaluation" && c.JSONPath == ".spec.evaluation")
	}
	if !mode || !evaluation {
		t.Errorf("want a Mode printer column for .spec.mode and an Evaluation one for .spec.evaluation: %+v", v.AdditionalPrinterColumns)
	}
}

// TestCRDGatewayLimitsWithinEngine: a list the schema accepts is never
// refused by the engine for its size, so a Policy the API server stores is
// not rejected by the webhook for a limit the schema could have stated.
func TestCRDGatewayLimitsWithinEngine(t *testing.T) {
	t.Parallel()
	spec := policyCRD(t).Schema.OpenAPIV3Schema.Properties["spec"]
	rule := spec.Properties["rules"].Items.Schema.Properties
	cond := rule["conditions"].Items.Schema.Properties
	when := rule["when"].Properties
	limits := map[string]struct {
		s   apiextensionsv1.JSONSchemaProps
		max int64
	}{
		"subjects.agents":           {rule["subjects"].Properties["agents"], engine.MaxBindingValues},
		"subjects.roles":            {rule["subjects"].Properties["roles"], engine.MaxBindingValues},
		"targets.servers":           {rule["targets"].Properties["servers"], engine.MaxBindingValues},
		"targets.tools":             {rule["targets"].Properties["tools"], engine.MaxBindingValues},
		"targets.resources":         {rule["targets"].Properties["resources"], engine.MaxResourceTarget},
		"targets.resources[].names": {rule["targets"].Properties["resources"].Items.Schema.Properties["names"], engine.MaxBindingValues},
		"select.action":             {rule["select"].Properties["action"], engine.MaxBindingValues},
		"select.sideEffect":         {rule["select"].Properties["sideEffect"], engine.MaxBindingValues},
		"when.schedule":             {when["schedule"], engine.MaxScheduleWindow},
		"when.environments":         {when["environments"], engine.MaxBindingValues},
		"when.sensitivity":          {when["sensitivity"], engine.MaxBindingValues},
		"when.actorConfidence":      {when["actorConfidence"], engine.MaxBindingValues},
		"conditions[].any":          {cond["any"], engine.MaxGroupMembers},
		"conditions[].any[].all":    {cond["any"].Items.Schema.Properties["all"], engine.MaxGroupMembers},
	}
	for name, l := range limits {
		if l.s.MaxItems == nil || *l.s.MaxItems > l.max || l.s.MinItems == nil || *l.s.MinItems != 1 {
			t.Errorf("%s: schema minItems %v maxItems %v; want 1 and at most the engine's %d", name, l.s.MinItems, l.s.MaxItems, l.max)
		}
	}
	ctx := rule["select"].Properties["context"]
	if ctx.MaxProperties == nil || *ctx.MaxProperties > engine.MaxContextKeys {
		t.Errorf("select.context maxProperties %v, want at most the engine's %d", ctx.MaxProperties, engine.MaxContextKeys)
	}
}
