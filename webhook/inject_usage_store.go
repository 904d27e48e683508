package webhook

import (
	"path"

	corev1 "k8s.io/api/core/v1"
)

const (
	usageStoreVolumeName = "toolgate-usage-store"
	usageStoreMountPath  = "/var/run/secrets/toolgate-usage-store"
	// UsageStorePasswordKey is the key of the usage store's password in
	// InjectOptions.UsageStorePasswordSecret.
	UsageStorePasswordKey = "password"
)

// injectUsageStore has the sidecar c count shared limits in the store at
// o.UsageStore (--usage-store), its keys prefixed with o.ClusterName, and
// with o.UsageStorePasswordSecret mounts that Secret's password key
// read-only into the sidecar alone (--usage-store-password-file): the
// agent's containers never mount it. Nothing without a store.
func injectUsageStore(pod *corev1.Pod, c *corev1.Container, o InjectOptions) {
	if o.UsageStore == "" {
		return
	}
	c.Args = append(c.Args, "--usage-store="+o.UsageStore)
	if o.ClusterName != "" {
		c.Args = append(c.Args, "--cluster-name="+o.ClusterName)
	}
	if o.UsageStorePasswordSecret == "" {
		return
	}
	c.Args = append(c.Args, "--usage-store-password-file="+path.Join(usageStoreMountPath, UsageStorePasswordKey))
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: usageStoreVolumeName, MountPath: usageStoreMountPath, ReadOnly: true})
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: usageStoreVolumeName, VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: o.UsageStorePasswordSecret,
			Items: []corev1.KeyToPath{{Key: UsageStorePasswordKey, Path: UsageStorePasswordKey}}},
	}})
}
