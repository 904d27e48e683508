package webhook

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// InjectMatchExpression is evaluated by the API server before it calls the
// pod webhook (matchConditions, Kubernetes 1.30+): Pods without the
// annotation never reach toolgate, so a slow or unavailable manager cannot
// delay any other Pod in the cluster. Annotations cannot be selected on;
// CEL can read them. The chart and config/webhook carry this same text.
const InjectMatchExpression = `has(object.metadata.annotations) && '` + v1alpha1.AnnotationInject +
	`' in object.metadata.annotations && object.metadata.annotations['` + v1alpha1.AnnotationInject + `'] == 'true'`

// InjectMatchConditionName names the condition in the webhook configuration.
const InjectMatchConditionName = "annotated-for-injection"

// InjectMatchConditions are the pod webhook's matchConditions.
func InjectMatchConditions() []admissionregistrationv1.MatchCondition {
	return []admissionregistrationv1.MatchCondition{{Name: InjectMatchConditionName, Expression: InjectMatchExpression}}
}
