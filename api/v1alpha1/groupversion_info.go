// Package v1alpha1 holds the toolgate.dev/v1alpha1 API: Policy and
// FrozenAgent, and Agent and MCPUpstream, who the governed agents are and
// what they may reach.
// +kubebuilder:object:generate=true
// +groupName=toolgate.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is group version used to register these objects.
	GroupVersion = schema.GroupVersion{Group: "toolgate.dev", Version: "v1alpha1"}

	// SchemeBuilder adds the types to a scheme; apimachinery's, so importing
	// the API does not pull in controller-runtime.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the types in this group-version to the given scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Policy{}, &PolicyList{}, &FrozenAgent{}, &FrozenAgentList{},
		&Agent{}, &AgentList{}, &MCPUpstream{}, &MCPUpstreamList{},
		&ClusterPolicy{}, &ClusterPolicyList{}, &ClusterFrozenAgent{}, &ClusterFrozenAgentList{},
		&PolicyException{}, &PolicyExceptionList{}, &ApprovalRequest{}, &ApprovalRequestList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
