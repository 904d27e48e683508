package webhook

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// +kubebuilder:webhook:path=/validate-toolgate-dev-v1alpha1-policyexception,mutating=false,failurePolicy=fail,sideEffects=None,groups=toolgate.dev,resources=policyexceptions,verbs=create;update,versions=v1alpha1,name=vpolicyexception.toolgate.dev,admissionReviewVersions=v1,timeoutSeconds=10

// DefaultMaxExceptionDays is how far ahead a PolicyException's expiresAt
// may be, by default (the manager's --max-exception-days).
const DefaultMaxExceptionDays = 30

// ExceptionValidator refuses a PolicyException whose expiresAt is already
// past or more than MaxDays ahead: an exception is a short, reviewed
// loosening, not a second way to write policy. The schema cannot say it
// (CEL in a CRD has no clock).
type ExceptionValidator struct {
	MaxDays int
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

var _ admission.Validator[*v1alpha1.PolicyException] = ExceptionValidator{}

// SetupExceptionWebhook registers the validator with the manager's webhook
// server.
func SetupExceptionWebhook(mgr ctrl.Manager, maxDays int) error {
	return ctrl.NewWebhookManagedBy(mgr, &v1alpha1.PolicyException{}).WithValidator(ExceptionValidator{MaxDays: maxDays}).Complete()
}

// ValidateCreate implements admission.Validator.
func (v ExceptionValidator) ValidateCreate(_ context.Context, e *v1alpha1.PolicyException) (admission.Warnings, error) {
	return nil, v.validate(e)
}

// ValidateUpdate implements admission.Validator. Only a new expiresAt is
// checked: an exception that has expired can still be relabelled, or have
// its finalizers removed, without being renewed.
func (v ExceptionValidator) ValidateUpdate(_ context.Context, old, e *v1alpha1.PolicyException) (admission.Warnings, error) {
	if old.Spec.ExpiresAt.Equal(&e.Spec.ExpiresAt) {
		return nil, nil
	}
	return nil, v.validate(e)
}

// ValidateDelete implements admission.Validator; deleting is always allowed.
func (ExceptionValidator) ValidateDelete(context.Context, *v1alpha1.PolicyException) (admission.Warnings, error) {
	return nil, nil
}

func (v ExceptionValidator) validate(e *v1alpha1.PolicyException) error {
	now := time.Now
	if v.Now != nil {
		now = v.Now
	}
	maxDays := v.MaxDays
	if maxDays <= 0 {
		maxDays = DefaultMaxExceptionDays
	}
	at, t := e.Spec.ExpiresAt.Time, now()
	limit := t.Add(time.Duration(maxDays) * 24 * time.Hour)
	path := field.NewPath("spec", "expiresAt")
	var err *field.Error
	switch {
	case !at.After(t):
		err = field.Invalid(path, at.UTC().Format(time.RFC3339), fmt.Sprintf(
			"already past (now is %s): an exception must end in the future, at most %d days ahead (--max-exception-days on the toolgate manager)",
			t.UTC().Format(time.RFC3339), maxDays))
	case at.After(limit):
		err = field.Invalid(path, at.UTC().Format(time.RFC3339), fmt.Sprintf(
			"more than %d days ahead, the limit the toolgate manager's --max-exception-days sets: end it by %s and renew it when it expires",
			maxDays, limit.UTC().Format(time.RFC3339)))
	default:
		return nil
	}
	return apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind("PolicyException").GroupKind(), e.Name, field.ErrorList{err})
}
