package webhook

import (
	"context"

	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
)

// +kubebuilder:webhook:path=/validate-toolgate-dev-v1alpha1-clusterpolicy,mutating=false,failurePolicy=fail,sideEffects=None,groups=toolgate.dev,resources=clusterpolicies,verbs=create;update,versions=v1alpha1,name=vclusterpolicy.toolgate.dev,admissionReviewVersions=v1,timeoutSeconds=10

// ClusterPolicyValidator rejects ClusterPolicies whose rules the engine
// cannot compile, as PolicyValidator does Policies, or whose
// namespaceSelector does not parse (the API server does not check a
// selector's operators; the operator would apply such a policy to every
// namespace, bundle.Selects).
type ClusterPolicyValidator struct{}

var _ admission.Validator[*v1alpha1.ClusterPolicy] = ClusterPolicyValidator{}

// SetupClusterPolicyWebhook registers the validator with the manager's
// webhook server.
func SetupClusterPolicyWebhook(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &v1alpha1.ClusterPolicy{}).WithValidator(ClusterPolicyValidator{}).Complete()
}

// ValidateCreate implements admission.Validator.
func (ClusterPolicyValidator) ValidateCreate(_ context.Context, p *v1alpha1.ClusterPolicy) (admission.Warnings, error) {
	return ValidateClusterPolicy(p)
}

// ValidateUpdate implements admission.Validator.
func (ClusterPolicyValidator) ValidateUpdate(_ context.Context, _, p *v1alpha1.ClusterPolicy) (admission.Warnings, error) {
	return ValidateClusterPolicy(p)
}

// ValidateDelete implements admission.Validator; deleting is always allowed.
func (ClusterPolicyValidator) ValidateDelete(context.Context, *v1alpha1.ClusterPolicy) (admission.Warnings, error) {
	return nil, nil
}

// ValidateClusterPolicy reviews p's rules as Validate does a Policy's, and
// its namespaceSelector.
func ValidateClusterPolicy(p *v1alpha1.ClusterPolicy) (admission.Warnings, error) {
	var errs field.ErrorList
	if err := bundle.SelectorError(p.Spec.NamespaceSelector); err != nil {
		errs = append(errs, field.Invalid(field.NewPath("spec", "namespaceSelector"), p.Spec.NamespaceSelector, err.Error()))
	}
	return review("ClusterPolicy", p.Name, bundle.ClusterPolicy(p), errs)
}
