package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/webhook"
)

// installApprovalGuards applies what config/default ships for approvals:
// the aggregated roles (renamed, so the built-in admin and view roles are
// left alone; their aggregation labels join them into those) and the
// approvals admission policy; binds alice as the namespace's admin and the
// agent's ServiceAccount to the sidecar's Role, as injection does.
func (r *approvalRig) installApprovalGuards() {
	t := r.t
	ctx := context.Background()
	for _, file := range []string{"config/rbac/aggregated_roles.yaml", "config/admission/approvals_admission_policy.yaml"} {
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), file))
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if len(u.Object) == 0 {
				continue
			}
			u.SetName("toolgate-e2e-" + u.GetName())
			if u.GetKind() == "ValidatingAdmissionPolicyBinding" {
				_ = unstructured.SetNestedField(u.Object, "toolgate-e2e-approvals", "spec", "policyName")
			}
			if err := r.cluster.Client.Create(ctx, &u); err != nil {
				t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
			}
		}
	}
	// envtest runs no controller-manager, so no aggregation controller:
	// each user is bound to the built-in role and to what toolgate's
	// aggregated roles would have joined into it.
	bind := func(user, role string) {
		if err := r.cluster.Client.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: user + "-" + role},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, role := range []string{"admin", "toolgate-e2e-admin", "toolgate-e2e-view"} {
		bind("alice", role)
	}
	for _, role := range []string{"edit", "toolgate-e2e-view"} {
		bind("bob", role)
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "toolgate-bundle-reader"}, Rules: webhook.SidecarRoleRules("toolgate-bundle")}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: "toolgate-bundle-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "pay-agent", Namespace: r.ns}}}
	if err := r.cluster.Client.Create(ctx, role); err != nil {
		t.Fatal(err)
	}
	if err := r.cluster.Client.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
}

// waitForGuards: the admission policy reaches the API server's admission
// plugin through an informer. Until it refuses a decision signed with
// another's name (a dry run on a pending request, so nothing is decided),
// the attacks below would prove nothing.
func (r *approvalRig) waitForGuards(name string) {
	r.t.Helper()
	testenv.EventuallyWithin(r.t, time.Minute, 200*time.Millisecond, "the approvals admission policy refuses a forged decidedBy", func() (bool, string) {
		var ar v1alpha1.ApprovalRequest
		if err := r.cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: r.ns, Name: name}, &ar); err != nil {
			return false, err.Error()
		}
		now := metav1.Now()
		ar.Status.Decision, ar.Status.DecidedBy, ar.Status.DecidedAt = v1alpha1.ApprovalApproved, "someone-else", &now
		err := r.cluster.Client.Status().Update(context.Background(), &ar, client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), "decidedBy"), fmt.Sprint(err)
	})
}

// kubeconfigAs is the admin's kubeconfig impersonating user (and groups):
// the API server's RBAC and admission see that user, as if they had
// logged in themselves.
func (r *approvalRig) kubeconfigAs(user string, groups ...string) string {
	r.t.Helper()
	kc, err := clientcmd.Load(testenv.Kubeconfig(r.t, r.cluster.Config))
	if err != nil {
		r.t.Fatal(err)
	}
	for _, a := range kc.AuthInfos {
		a.Impersonate, a.ImpersonateGroups = user, groups
	}
	data, err := clientcmd.Write(*kc)
	if err != nil {
		r.t.Fatal(err)
	}
	return testenv.WriteKubeconfig(r.t, data)
}

// toolgateAs runs `toolgate ARGS -n NS --kubeconfig` as user.
func (r *approvalRig) toolgateAs(kubeconfig string, args ...string) (int, string) {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.bin, append(args, "-n", r.ns, "--kubeconfig", kubeconfig)...)
	out, err := cmd.CombinedOutput()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		r.t.Fatalf("toolgate %s: %v", strings.Join(args, " "), err)
	}
	return code, string(out)
}
