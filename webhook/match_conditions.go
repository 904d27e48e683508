package webhook

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// InjectMatchExpression is evaluated by the API server before it calls the
// pod webhook (matchConditions, Kubernetes 1.30+): Pods created without the
// annotation never reach toolgate, so a slow or unavailable manager cannot
// delay any other Pod in the cluster. Annotations cannot be selected on;
// CEL can read them. The chart and config/webhook carry this same text.
const InjectMatchExpression = `request.operation != 'CREATE' || (has(object.metadata.annotations) && '` + v1alpha1.AnnotationInject +
	`' in object.metadata.annotations && object.metadata.annotations['` + v1alpha1.AnnotationInject + `'] == 'true')`

// InjectedPodUpdateExpression lets through, besides creates, only the
// updates (of a Pod, or of its ephemeral containers: kubectl debug; the
// webhook's rules name no other subresource) of a Pod that carries the
// sidecar as stored (oldObject): not as the update's own body says, and
// not by annotation, which a Pod author can remove from a running Pod
// first. Containers cannot be added to or removed from a Pod, so this
// holds for its life.
const InjectedPodUpdateExpression = `request.operation == 'CREATE' || ` +
	`oldObject.spec.containers.exists(c, c.name == '` + SidecarName + `') || ` +
	`(has(oldObject.spec.initContainers) && oldObject.spec.initContainers.exists(c, c.name == '` + SidecarName + `'))`

// The conditions' names in the webhook configuration.
const (
	InjectMatchConditionName       = "annotated-for-injection"
	InjectedPodUpdateConditionName = "updating-an-injected-pod"
)

// InjectMatchConditions are the pod webhook's matchConditions; the API
// server calls it when all hold.
func InjectMatchConditions() []admissionregistrationv1.MatchCondition {
	return []admissionregistrationv1.MatchCondition{
		{Name: InjectMatchConditionName, Expression: InjectMatchExpression},
		{Name: InjectedPodUpdateConditionName, Expression: InjectedPodUpdateExpression},
	}
}
