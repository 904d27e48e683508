package webhook

import (
	"context"
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/sidecar"
)

// TestInjectedSidecarCountsSharedLimitsInTheUsageStore: with a usage
// store, the sidecar gets --usage-store, --cluster-name and the password
// Secret's key mounted read-only into it alone; the real sidecar flags
// accept the args. A Pod may not declare the volume's name; without a
// store nothing changes.
func TestInjectedSidecarCountsSharedLimitsInTheUsageStore(t *testing.T) {
	t.Parallel()
	o := InjectOptions{Image: "toolgate:test", BundleConfigMap: "toolgate-bundle", Socket: "/var/run/toolgate/toolgate.sock",
		RunAsUser: DefaultSidecarUID, RunAsGroup: DefaultSidecarUID, Native: true, ClusterName: "prod-eu",
		UsageStore: "redis://redis.toolgate-system.svc:6379/0", UsageStorePasswordSecret: "toolgate-redis"}
	p := pod("counting", map[string]string{v1alpha1.AnnotationInject: "true"})
	injectSidecar(p, o, nil)
	c := sidecarOf(t, p)
	args := expand(c.Args[1:], map[string]string{"POD_NAMESPACE": ns, "POD_NAME": p.Name, "POD_UID": "0d6e1c2a-5b7f-4e3a-9c1d-2f4b6a8c0e13", "TOOLGATE_AGENT_ID": "agent-sa"})
	so := sidecar.DefaultOptions()
	fs := pflag.NewFlagSet("sidecar", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	so.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := so.Validate(); err != nil {
		t.Fatalf("toolgate sidecar %q: %v", args, err)
	}
	if so.UsageStore != o.UsageStore || so.ClusterName != "prod-eu" || so.UsageStorePasswordFile != "/var/run/secrets/toolgate-usage-store/password" {
		t.Errorf("usage store %q cluster %q password file %q", so.UsageStore, so.ClusterName, so.UsageStorePasswordFile)
	}
	var found bool
	for _, v := range p.Spec.Volumes {
		if v.Name != usageStoreVolumeName {
			continue
		}
		found = true
		if v.Secret == nil || v.Secret.SecretName != "toolgate-redis" || len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != "password" {
			t.Errorf("usage store volume %+v", v.VolumeSource)
		}
	}
	if !found {
		t.Fatal("no usage store password volume")
	}
	for _, list := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for _, ct := range list {
			for _, m := range ct.VolumeMounts {
				if m.Name != usageStoreVolumeName {
					continue
				}
				if ct.Name != SidecarName {
					t.Errorf("container %s mounts the usage store password", ct.Name)
				} else if !m.ReadOnly {
					t.Error("the sidecar mounts the usage store password writable")
				}
			}
		}
	}

	asInjected := p.DeepCopy()
	delete(asInjected.Annotations, v1alpha1.AnnotationInject)
	if err := k8sClient.Create(context.Background(), asInjected, client.DryRunAll); err != nil {
		t.Errorf("the API server refuses the injected Pod: %v", err)
	}
	thief := pod("usage-store-thief", map[string]string{v1alpha1.AnnotationInject: "true"})
	thief.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: usageStoreVolumeName, MountPath: "/stolen"}}
	thief.Spec.Volumes = []corev1.Volume{{Name: usageStoreVolumeName, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	if err := k8sClient.Create(context.Background(), thief, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "usage store") {
		t.Errorf("a Pod holding the usage store password's volume name: %v", err)
	}

	o.UsageStore, o.UsageStorePasswordSecret = "", ""
	plain := pod("not-counting", map[string]string{v1alpha1.AnnotationInject: "true"})
	injectSidecar(plain, o, nil)
	for _, a := range sidecarOf(t, plain).Args {
		if strings.HasPrefix(a, "--usage-store") || strings.HasPrefix(a, "--cluster-name") {
			t.Errorf("without a usage store the sidecar got %q", a)
		}
	}
	for _, v := range plain.Spec.Volumes {
		if v.Name == usageStoreVolumeName {
			t.Error("without a usage store the Pod got its password volume")
		}
	}
}
