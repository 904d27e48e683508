package testenv

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// RulesPerPolicy is the most rules one Policy holds (the CRD's MaxItems).
const RulesPerPolicy = 1000

// ManyRulePolicies are Policies in namespace with n rules in all, at most
// RulesPerPolicy each, named rules-000, rules-001, ... Their rules vary the
// way real ones do (five shapes in turn: a denied tool with a description,
// an agent-scoped condition, an ask with an approval timeout, a regular
// expression on a path, an environment-scoped warn), so their size and
// compression are what a large namespace would publish. Rule i (from 0)
// of the whole set names tool LastRuleTool(i); the last rule denies it
// outright, so a test can tell that the whole bundle loaded.
func ManyRulePolicies(namespace string, n int) []v1alpha1.Policy {
	var out []v1alpha1.Policy
	for start := 0; start < n; start += RulesPerPolicy {
		p := v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("rules-%03d", start/RulesPerPolicy)},
			Spec: v1alpha1.PolicySpec{DefaultEffect: v1alpha1.EffectAllow}}
		for i := start; i < min(n, start+RulesPerPolicy); i++ {
			p.Spec.Rules = append(p.Spec.Rules, realisticRule(i, i == n-1))
		}
		out = append(out, p)
	}
	return out
}

// RuleTool is the tool rule i of ManyRulePolicies names.
func RuleTool(i int) string { return fmt.Sprintf("tool-%05d", i) }

func realisticRule(i int, last bool) v1alpha1.Rule {
	tool := RuleTool(i)
	r := v1alpha1.Rule{ID: fmt.Sprintf("r%05d", i), Effect: "deny",
		Targets: &v1alpha1.Targets{Tools: []string{tool}}}
	if last {
		r.Description = "the last rule of the set: " + tool + " is never allowed"
		return r
	}
	switch i % 5 {
	case 0:
		r.Description = fmt.Sprintf("%s: %s (ticket SEC-%d)", tool, prose(i, 12+i%20), 1000+i)
	case 1:
		r.Subjects = &v1alpha1.Subjects{Agents: []string{fmt.Sprintf("agent-%d", i%97), fmt.Sprintf("%s-%d", words[i%len(words)], i)}, Roles: []string{"ci"}}
		r.Conditions = []v1alpha1.Condition{{Field: "input.command", Operator: "contains", Value: jsonValue(fmt.Sprintf("rm -rf /data/%d", i))}}
	case 2:
		r.Effect = "ask"
		r.Description = fmt.Sprintf("payments above %d need a person's approval: %s", 100*(i%50+1), prose(i, 6+i%9))
		r.Approval = &v1alpha1.RuleApproval{Timeout: "10m"}
		r.Conditions = []v1alpha1.Condition{{Field: "input.amount", Operator: "gt", Value: jsonValue(100 * (i%50 + 1))}}
	case 3:
		r.Conditions = []v1alpha1.Condition{{Field: "input.path", Operator: "matches", Value: jsonValue(fmt.Sprintf(`^/(etc|root|home/[a-z]+/\.ssh)/%d`, i))}}
	case 4:
		r.Effect = "warn"
		r.Description = "calls from staging are watched: " + prose(i, 4+i%7)
		r.When = &v1alpha1.When{Environments: []string{"staging", fmt.Sprintf("team-%d", i%13)}}
	}
	return r
}

// words are what rule descriptions are written with; prose picks n of
// them for rule i with a fixed generator, so every run writes the same
// bytes while the text compresses no better than English does.
var words = strings.Fields(`the a tool agent call calls data customer customers production staging
	write writes read reads delete deletes export exports payment payments account accounts secret
	secrets key keys token tokens database table tables file files path paths request requests must
	not never only after before during review approval approved security team owner owners incident
	audit audited ticket policy rule rules limit limits billing invoice invoices refund refunds email
	emails report reports cluster namespace backup backups restore shell command commands network
	external internal vendor vendors contract contracts region regions europe quarterly monthly
	weekly daily night weekend holiday freeze release deploy deploys rollback migration schema`)

func prose(i, n int) string {
	rng := rand.New(rand.NewPCG(uint64(i), 29))
	out := make([]string, n)
	for k := range out {
		out[k] = words[rng.IntN(len(words))]
	}
	return strings.Join(out, " ")
}

func jsonValue(v any) *apiextensionsv1.JSON {
	raw, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return &apiextensionsv1.JSON{Raw: raw}
}

// WithDescriptions gives every rule of policies a description of words
// words of prose (about six bytes each): the verbose end of real
// namespaces, where descriptions explain each rule at length.
func WithDescriptions(policies []v1alpha1.Policy, words int) []v1alpha1.Policy {
	k := 0
	for i := range policies {
		for j := range policies[i].Spec.Rules {
			policies[i].Spec.Rules[j].Description = prose(1_000_000+k, words)
			k++
		}
	}
	return policies
}
