package chart

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// networkPolicies renders the chart and returns its NetworkPolicies by
// namespace.
func networkPolicies(t *testing.T, args ...string) (map[string]*networkingv1.NetworkPolicy, installation) {
	t.Helper()
	in := install(t, args...)
	out := map[string]*networkingv1.NetworkPolicy{}
	for _, o := range all(in.objs, "NetworkPolicy") {
		out[o.GetNamespace()] = typed[networkingv1.NetworkPolicy](t, o)
	}
	return out, in
}

// tcpOpenToAll reports whether rule lets anyone reach TCP port.
func opensToAll(rule networkingv1.NetworkPolicyIngressRule, protocol corev1.Protocol, port int32) bool {
	if len(rule.From) != 0 {
		return false
	}
	for _, p := range rule.Ports {
		end := p.Port.IntVal
		if p.EndPort != nil {
			end = *p.EndPort
		}
		if *p.Protocol == protocol && p.Port.IntVal <= port && port <= end {
			return true
		}
	}
	return false
}

// With networkPolicy.enabled, each agent namespace gets a NetworkPolicy on
// the Pods the injector labels: the metrics port the manager injects is
// open to the monitoring namespaces only, and (allowOtherPorts) every
// other port stays open to all, so the agent's own service is untouched.
// The non-default install's policies also pass the API server's dry run
// (TestRenderedObjectsAreAccepted).
func TestNetworkPolicyGuardsTheSidecarMetricsPort(t *testing.T) {
	t.Parallel()
	if n := len(all(render(t), "NetworkPolicy")); n != 0 {
		t.Errorf("%d NetworkPolicies by default", n)
	}
	nps, in := networkPolicies(t, nonDefault...)
	port := in.flag(t, "sidecar-metrics-port")
	if len(nps) != 2 || nps["team-a"] == nil || nps["team-b"] == nil {
		t.Fatalf("NetworkPolicies in %v, want team-a and team-b (manager.namespaces)", keys(nps))
	}
	for ns, np := range nps {
		injected := labels.Set{v1alpha1.LabelInjected: "true"}
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || !sel.Matches(injected) || sel.Matches(labels.Set{"app": "agent"}) {
			t.Errorf("%s: selects %v, want the injected Pods only", ns, np.Spec.PodSelector)
		}
		if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
			t.Errorf("%s: policy types %v, want Ingress alone (egress untouched)", ns, np.Spec.PolicyTypes)
		}
		rules := np.Spec.Ingress
		if len(rules) != 2 {
			t.Fatalf("%s: %d ingress rules, want the metrics rule and the other ports", ns, len(rules))
		}
		metrics := rules[0]
		if len(metrics.Ports) != 1 || metrics.Ports[0].Port.String() != port || *metrics.Ports[0].Protocol != corev1.ProtocolTCP {
			t.Errorf("%s: metrics rule ports %+v, want TCP %s (--sidecar-metrics-port)", ns, metrics.Ports, port)
		}
		if len(metrics.From) != 1 || metrics.From[0].NamespaceSelector == nil ||
			metrics.From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] != "monitoring" ||
			metrics.From[0].PodSelector == nil || metrics.From[0].PodSelector.MatchLabels["app"] != "prometheus" {
			t.Errorf("%s: metrics rule admits %+v, want monitoring's prometheus Pods", ns, metrics.From)
		}
		other := rules[1]
		for _, p := range []int32{1, 80, 8181, 9299, 9301, 65535} {
			if !opensToAll(other, corev1.ProtocolTCP, p) {
				t.Errorf("%s: TCP %d is closed to the agent's clients", ns, p)
			}
		}
		if opensToAll(other, corev1.ProtocolTCP, 9300) {
			t.Errorf("%s: the metrics port %s is open to all", ns, port)
		}
		if !opensToAll(other, corev1.ProtocolUDP, 53) || !opensToAll(other, corev1.ProtocolSCTP, 9300) {
			t.Errorf("%s: UDP or SCTP closed", ns)
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func TestNetworkPolicyOptions(t *testing.T) {
	t.Parallel()
	// networkPolicy.namespaces wins over manager.namespaces.
	nps, _ := networkPolicies(t, "--set", "networkPolicy.enabled=true", "--set", "networkPolicy.namespaces={agents}",
		"--set", "manager.namespaces={team-a}")
	if len(nps) != 1 || nps["agents"] == nil {
		t.Errorf("NetworkPolicies in %v, want agents", keys(nps))
	}
	// allowOtherPorts=false leaves the other ports to the user's policies;
	// the default metrics port (9191) is the one restricted.
	nps, _ = networkPolicies(t, "--set", "networkPolicy.enabled=true", "--set", "networkPolicy.namespaces={agents}",
		"--set", "networkPolicy.allowOtherPorts=false")
	if np := nps["agents"]; np == nil || len(np.Spec.Ingress) != 1 || np.Spec.Ingress[0].Ports[0].Port.IntVal != 9191 {
		t.Errorf("allowOtherPorts=false: %+v", np)
	}
	// A metrics port at either end of the range leaves no empty range.
	for _, p := range []string{"1", "65535"} {
		nps, _ = networkPolicies(t, "--set", "networkPolicy.enabled=true", "--set", "networkPolicy.namespaces={agents}",
			"--set", "sidecarInjection.metricsPort="+p)
		if np := nps["agents"]; np == nil || len(np.Spec.Ingress[1].Ports) != 3 {
			t.Errorf("metrics port %s: other-ports rule %+v", p, np.Spec.Ingress)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--set", "networkPolicy.enabled=true"}, "needs networkPolicy.namespaces"},
		{[]string{"--set", "networkPolicy.enabled=true", "--set", "networkPolicy.namespaces={a}", "--set", "sidecarInjection.metricsPort=0"}, "needs sidecarInjection.enabled and a sidecarInjection.metricsPort"},
		{[]string{"--set", "networkPolicy.enabled=true", "--set", "networkPolicy.namespaces={a}", "--set", "sidecarInjection.enabled=false"}, "needs sidecarInjection.enabled"},
	} {
		if _, err := helmTemplate(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want a refusal naming %q", tc.args, err, tc.want)
		}
	}
}
