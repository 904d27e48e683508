// Package webhook holds the admission webhooks. The Policy and ClusterPolicy
// validators ask the engine's compile step, so the rules of what is valid
// exist once; FrozenAgent and ClusterFrozenAgent have no webhook on purpose,
// so the kill switch works while webhooks are down.
package webhook

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/engine/lint"
)

// +kubebuilder:webhook:path=/validate-toolgate-dev-v1alpha1-policy,mutating=false,failurePolicy=fail,sideEffects=None,groups=toolgate.dev,resources=policies,verbs=create;update,versions=v1alpha1,name=vpolicy.toolgate.dev,admissionReviewVersions=v1,timeoutSeconds=10

// PolicyValidator rejects Policies the engine cannot compile and warns about
// valid ones that are probably mistakes.
type PolicyValidator struct{}

var _ admission.Validator[*v1alpha1.Policy] = PolicyValidator{}

// SetupPolicyWebhook registers the validator with the manager's webhook server.
func SetupPolicyWebhook(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &v1alpha1.Policy{}).WithValidator(PolicyValidator{}).Complete()
}

// ValidateCreate implements admission.Validator.
func (PolicyValidator) ValidateCreate(_ context.Context, p *v1alpha1.Policy) (admission.Warnings, error) {
	return Validate(p)
}

// ValidateUpdate implements admission.Validator.
func (PolicyValidator) ValidateUpdate(_ context.Context, _, p *v1alpha1.Policy) (admission.Warnings, error) {
	return Validate(p)
}

// ValidateDelete implements admission.Validator; deleting is always allowed.
func (PolicyValidator) ValidateDelete(context.Context, *v1alpha1.Policy) (admission.Warnings, error) {
	return nil, nil
}

// Validate reviews p with the engine (lint.Review, as `toolgate validate`
// does): its compile diagnostics become a field.ErrorList (an Invalid error
// naming rule and condition), its lint findings warnings.
func Validate(p *v1alpha1.Policy) (admission.Warnings, error) {
	return review("Policy", p.Name, bundle.Policy(p), nil)
}

// review is Validate for a Policy or ClusterPolicy (kind), p converted to the
// engine's; errs are what the caller found wrong besides its rules.
func review(kind, name string, p engine.Policy, errs field.ErrorList) (admission.Warnings, error) {
	problems, found := lint.Review(p)
	for _, d := range problems {
		errs = append(errs, field.Invalid(fieldPath(d.Location), field.OmitValueType{}, detail(d)))
	}
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind(kind).GroupKind(), name, errs)
	}
	var warnings admission.Warnings
	for _, w := range found {
		warnings = append(warnings, fmt.Sprintf("%s: %s", w.Field, w.Message))
	}
	return warnings, nil
}

func detail(d engine.Diagnostic) string {
	switch {
	case d.ConditionIndex >= 0:
		return fmt.Sprintf("rule %q condition %d: %s", d.RuleID, d.ConditionIndex, d.Message)
	case d.RuleIndex >= 0:
		return fmt.Sprintf("rule %q: %s", d.RuleID, d.Message)
	}
	return d.Message
}
