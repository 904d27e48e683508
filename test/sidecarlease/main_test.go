// Package sidecarlease tests the sidecar's Lease end to end on a real API
// server (envtest): a real `toolgate sidecar` process, holding a
// ServiceAccount token bound to a Pod object as kubelet would mount it,
// writes its Lease; and the sidecar Lease admission policy
// (config/admission), with the sidecar's real RBAC
// (webhook.SidecarRoleRules), refuses every forgery: another Pod's
// sidecar, and a namespace editor.
package sidecarlease

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/sidecarlease"
	"github.com/toolgate/toolgate/webhook"
)

var (
	cfg   *rest.Config
	admin client.Client
	kube  *kubernetes.Clientset
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Main(m, func(s testenv.Suite) {
		cfg, admin = s.Config, s.Client
		kube = kubernetes.NewForConfigOrDie(cfg)
	}))
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// agentNamespace is a namespace with a ServiceAccount granted what
// injection grants a sidecar (webhook.SidecarRoleRules, and the cluster
// freezes' read every ServiceAccount gets), and Pods of it named pods.
type agentNamespace struct {
	name, sa string
	pods     map[string]*corev1.Pod
}

func newAgentNamespace(t *testing.T, prefix string, pods ...string) agentNamespace {
	t.Helper()
	ns := agentNamespace{name: testenv.Namespace(t, admin, prefix), sa: "agent-sa", pods: map[string]*corev1.Pod{}}
	// envtest runs no ServiceAccount controller: create it as it would.
	if err := admin.Create(ctx(t), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns.name, Name: ns.sa}}); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns.name, Name: "toolgate-bundle-reader"},
		Rules: webhook.SidecarRoleRules("toolgate-bundle")}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns.name, Name: "toolgate-bundle-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ns.sa, Namespace: ns.name}}}
	for _, o := range []client.Object{role, binding} {
		if err := admin.Create(ctx(t), o); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range pods {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns.name, Name: name, Labels: map[string]string{"toolgate.dev/injected": "true"}},
			Spec: corev1.PodSpec{ServiceAccountName: ns.sa, Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}}}
		if err := admin.Create(ctx(t), p); err != nil {
			t.Fatal(err)
		}
		ns.pods[name] = p
	}
	user := "system:serviceaccount:" + ns.name + ":" + ns.sa
	if !testenv.CanEventually(t, admin, user, []string{"system:serviceaccounts", "system:serviceaccounts:" + ns.name, "system:authenticated"},
		"create", "coordination.k8s.io", "leases", ns.name, "") {
		t.Fatalf("the sidecar's Role never let %s create Leases", user)
	}
	return ns
}

// podToken is a token of the namespace's ServiceAccount bound to the Pod
// pod, as kubelet mounts it in that Pod: the API server then puts the
// Pod's name and UID in the user's extra.
func (ns agentNamespace) podToken(t *testing.T, pod string) string {
	t.Helper()
	p := ns.pods[pod]
	tr, err := kube.CoreV1().ServiceAccounts(ns.name).CreateToken(ctx(t), ns.sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600)),
			BoundObjectRef: &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest bound to Pod %s: %v", pod, err)
	}
	return tr.Status.Token
}

// asToken is cfg's server and CA with token as the only credential.
func asToken(token string) *rest.Config {
	return &rest.Config{Host: cfg.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: cfg.CAData}}
}

// tokenKubeconfig writes a kubeconfig holding only token, for a process.
func tokenKubeconfig(t *testing.T, token string) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["pod"] = &clientcmdapi.AuthInfo{Token: token}
	kc.Contexts["pod"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "pod"}
	kc.CurrentContext = "pod"
	data, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return testenv.WriteKubeconfig(t, data)
}

// installLeasePolicy applies config/admission's sidecar Lease policy and
// binding (what config/default installs; test/chart checks the chart's is
// the same) once for the package.
func installLeasePolicy(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "admission", "sidecar_lease_admission_policy.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		var o unstructured.Unstructured
		if err := dec.Decode(&o.Object); err != nil {
			break
		}
		if len(o.Object) == 0 {
			continue
		}
		if err := admin.Create(ctx(t), &o); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
}

var policyOnce sync.Once

// requireLeasePolicy installs the policy and waits until it refuses a
// forged Lease: policies reach the admission plugin through an informer.
func requireLeasePolicy(t *testing.T) {
	t.Helper()
	policyOnce.Do(func() {
		installLeasePolicy(t)
		probe := testenv.Namespace(t, admin, "lease-policy-probe-")
		for i := 0; ; i++ {
			l := sidecarLease(probe, fmt.Sprintf("probe-%d", i), nil)
			err := admin.Create(ctx(t), l)
			if err != nil {
				if !strings.Contains(err.Error(), refusal) {
					t.Fatalf("the policy's first refusal: %v, want one saying %q", err, refusal)
				}
				return
			}
			if i > 300 {
				t.Fatal("a forged sidecar Lease is still admitted a minute after the policy was applied")
			}
			time.Sleep(200 * time.Millisecond)
		}
	})
}

// refusal is what every refusal of the policy says.
const refusal = "carries toolgate.dev/sidecar"

// sidecarLease is a Lease as a sidecar writes it, named name in ns,
// owned by owner (none when nil).
func sidecarLease(ns, name string, owner *corev1.Pod) *coordinationv1.Lease {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels:      map[string]string{v1alpha1.LabelSidecar: "true"},
		Annotations: v1alpha1.NewSidecarReport("forged", nil, "v0").Annotations()},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To(int32(30)),
			RenewTime: ptr.To(metav1.NewMicroTime(time.Now()))}}
	if owner != nil {
		l.OwnerReferences = []metav1.OwnerReference{sidecarlease.PodOwner(sidecarlease.Pod{Namespace: owner.Namespace, Name: owner.Name, UID: owner.UID})}
	}
	return l
}
