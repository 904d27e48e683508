package webhook

import (
	"path"

	corev1 "k8s.io/api/core/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

const (
	reportsTokenVolumeName = "toolgate-reports-token"
	reportsTokenMountPath  = "/var/run/secrets/toolgate/reports"
	// reportsTokenSeconds is the shortest life the kubelet grants a
	// projected token; it renews it at 80% of that, and the sidecar reads
	// the file again for each batch.
	reportsTokenSeconds = 600
)

// injectReports has the sidecar c also send its decision log to the
// operator's reports endpoint at url, authenticated by a token of the
// Pod's ServiceAccount for v1alpha1.ReportsAudience alone: the API server
// refuses it, so the endpoint (or anyone who saw a batch on the way) cannot
// act on the cluster with it. Only the sidecar mounts it.
func injectReports(pod *corev1.Pod, c *corev1.Container, url string) {
	c.Args = append(c.Args, "--decision-log-url="+url,
		"--decision-log-token-file="+path.Join(reportsTokenMountPath, "token"))
	c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: reportsTokenVolumeName, MountPath: reportsTokenMountPath, ReadOnly: true})
	seconds := int64(reportsTokenSeconds)
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: reportsTokenVolumeName, VolumeSource: corev1.VolumeSource{
		Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{{
			ServiceAccountToken: &corev1.ServiceAccountTokenProjection{
				Audience: v1alpha1.ReportsAudience, ExpirationSeconds: &seconds, Path: "token"},
		}}},
	}})
}
