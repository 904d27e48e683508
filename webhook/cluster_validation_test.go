package webhook

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

func clusterPolicyFrom(t *testing.T, name, spec string) *v1alpha1.ClusterPolicy {
	t.Helper()
	cp := &v1alpha1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := yaml.UnmarshalStrict([]byte(spec), &cp.Spec); err != nil {
		t.Fatalf("test spec: %v\n%s", err, spec)
	}
	return cp
}

// wantInvalid checks err is the API server's Invalid error saying every
// one of want.
func wantInvalid(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("%s: %v, want Invalid", what, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: error %q does not say %q", what, err, w)
		}
	}
}

// A ClusterPolicy goes through the same engine review as a Policy, through
// the API server's admission chain, plus its namespaceSelector: the API
// server does not check a selector's operators, and the operator would
// apply a selector it cannot read to every namespace.
func TestClusterPolicyWebhookRefusesBadSelectorsAndRules(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		name, spec string
		want       []string
	}{
		{"unknown operator", rule(`{field: tool_name, operator: eq, value: rm}`) +
			"namespaceSelector: {matchExpressions: [{key: team, operator: Sometimes, values: [a]}]}\n",
			[]string{"ClusterPolicy.toolgate.dev", "spec.namespaceSelector", `"Sometimes" is not a valid label selector operator`}},
		{"In without values", rule(`{field: tool_name, operator: eq, value: rm}`) +
			"namespaceSelector: {matchExpressions: [{key: team, operator: In}]}\n",
			[]string{"spec.namespaceSelector", "values"}},
		{"bad label key", rule(`{field: tool_name, operator: eq, value: rm}`) +
			"namespaceSelector: {matchLabels: {'bad key!': x}}\n",
			[]string{"spec.namespaceSelector"}},
		{"rule that does not compile", rule(`{field: input.command, operator: matches, value: "rm(?=x)"}`),
			[]string{"ClusterPolicy.toolgate.dev", "spec.rules[0].conditions[0].value", `rule "r1" condition 0`, "does not compile"}},
		{"both at once", rule(`{field: input.command, operator: matches, value: "rm(?=x)"}`) +
			"namespaceSelector: {matchExpressions: [{key: team, operator: Sometimes}]}\n",
			[]string{"spec.namespaceSelector", "spec.rules[0].conditions[0].value"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := k8sClient.Create(ctx, clusterPolicyFrom(t, "refused", tt.spec))
			wantInvalid(t, tt.name, err, tt.want...)
		})
	}

	good := clusterPolicyFrom(t, "good-guardrail", rule(`{field: tool_name, operator: eq, value: rm}`)+
		"namespaceSelector: {matchExpressions: [{key: team, operator: In, values: [payments]}]}\nallowExceptions: true\n")
	if err := k8sClient.Create(ctx, good); err != nil {
		t.Fatalf("a valid ClusterPolicy was refused: %v", err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, good) })
	// Updates are reviewed too.
	good.Spec.NamespaceSelector.MatchExpressions[0].Operator = "Sometimes"
	wantInvalid(t, "update to a bad selector", k8sClient.Update(ctx, good), "spec.namespaceSelector", "Sometimes")
}

func policyException(name string, expiresAt time.Time) *v1alpha1.PolicyException {
	return &v1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.PolicyExceptionSpec{PolicyRef: v1alpha1.PolicyReference{Kind: v1alpha1.PolicyKindPolicy, Name: "guard"},
			RuleIDs: []string{"no-rm"}, Agents: v1alpha1.ExceptionAgents{AgentIDs: []string{"migrator"}},
			ExpiresAt: metav1.NewTime(expiresAt), Justification: "INC-7"}}
}

// A PolicyException may last at most --max-exception-days (30 here, the
// default) and must end in the future; the refusal names the limit and the
// flag. Renewing moves expiresAt, and is held to the same limit.
func TestPolicyExceptionWebhookRefusesLongOrPastExpiry(t *testing.T) {
	ctx := context.Background()
	now := time.Now()
	wantInvalid(t, "31 days", k8sClient.Create(ctx, policyException("too-long", now.Add(31*24*time.Hour))),
		"PolicyException.toolgate.dev", "spec.expiresAt", "more than 30 days ahead", "--max-exception-days")
	wantInvalid(t, "a year", k8sClient.Create(ctx, policyException("a-year", now.Add(365*24*time.Hour))),
		"more than 30 days ahead")
	wantInvalid(t, "an hour ago", k8sClient.Create(ctx, policyException("past", now.Add(-time.Hour))),
		"spec.expiresAt", "already past", "at most 30 days ahead")

	ok := policyException("fortnight", now.Add(14*24*time.Hour))
	if err := k8sClient.Create(ctx, ok); err != nil {
		t.Fatalf("a 14-day exception was refused: %v", err)
	}
	t.Cleanup(func() { _ = k8sClient.Delete(ctx, ok) })
	ok.Spec.ExpiresAt = metav1.NewTime(now.Add(60 * 24 * time.Hour))
	wantInvalid(t, "renewed for 60 days", k8sClient.Update(ctx, ok), "more than 30 days ahead")

	// An edit that leaves expiresAt alone is not reviewed again.
	if err := k8sClient.Get(ctx, client.ObjectKeyFromObject(ok), ok); err != nil {
		t.Fatal(err)
	}
	ok.Spec.Justification = "INC-7, reviewed"
	if err := k8sClient.Update(ctx, ok); err != nil {
		t.Fatalf("editing the justification: %v", err)
	}
}

// The validator's clock and limit, without the API server: the boundaries.
func TestExceptionValidatorBoundaries(t *testing.T) {
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	v := ExceptionValidator{MaxDays: 7, Now: func() time.Time { return now }}
	for _, tt := range []struct {
		at   time.Time
		want string // "" accepted
	}{
		{now.Add(7 * 24 * time.Hour), ""},
		{now.Add(time.Second), ""},
		{now.Add(7*24*time.Hour + time.Second), "more than 7 days ahead"},
		{now, "already past"},
	} {
		_, err := v.ValidateCreate(context.Background(), policyException("x", tt.at))
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.at, err)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: %v, want %q", tt.at, err, tt.want)
		}
	}
}
