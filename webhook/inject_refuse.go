package webhook

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/sidecar"
)

// refuseInjection returns why an annotated Pod must not be admitted: it
// declares its own toolgate-sidecar container (one the injector did not
// write: any --agent-id, --service-account, bundle or none at all), or it
// declares or mounts the volumes the injector gives the sidecar alone (its
// API token and its bundle cache, which another container could read or
// poison, and the socket's directory, which it could make writable). Skipping such a Pod silently, as the injector once did, let a
// Pod author pick the guard that guards them.
func refuseInjection(pod *corev1.Pod) error {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	reserved := map[string]string{
		tokenVolumeName:  "the sidecar's API token",
		cacheVolumeName:  "the sidecar's bundle cache",
		socketVolumeName: "the sidecar's decision socket directory (read-only in other containers)",
	}
	for _, list := range []struct {
		path       *field.Path
		containers []corev1.Container
	}{{spec.Child("initContainers"), pod.Spec.InitContainers}, {spec.Child("containers"), pod.Spec.Containers}} {
		for i, c := range list.containers {
			p := list.path.Index(i)
			if c.Name == SidecarName {
				errs = append(errs, field.Forbidden(p.Child("name"), fmt.Sprintf(
					"%q is the container toolgate injects; a Pod annotated for injection may not declare its own (remove it and let the injector add it)", SidecarName)))
				continue
			}
			for j, m := range c.VolumeMounts {
				if what, ok := reserved[m.Name]; ok {
					errs = append(errs, field.Forbidden(p.Child("volumeMounts").Index(j).Child("name"), fmt.Sprintf(
						"volume %q is %s: only the injected %s container may mount it", m.Name, what, SidecarName)))
				}
			}
		}
	}
	errs = append(errs, refuseBindings(pod)...)
	for i, v := range pod.Spec.Volumes {
		if what, ok := reserved[v.Name]; ok {
			errs = append(errs, field.Forbidden(spec.Child("volumes").Index(i).Child("name"), fmt.Sprintf(
				"volume name %q is reserved for %s, which the injector adds", v.Name, what)))
		}
	}
	return podInvalid(pod, errs)
}

// podInvalid is the Invalid error refusing pod for errs, nil without any.
func podInvalid(pod *corev1.Pod, errs field.ErrorList) error {
	if len(errs) == 0 {
		return nil
	}
	name := pod.Name
	if name == "" {
		name = pod.GenerateName
	}
	return apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Pod").GroupKind(), name, errs)
}

// refuseBindings checks the annotations that become the sidecar's --roles
// and --environment with the sidecar's own parsing: a value it would
// refuse would otherwise crash-loop the Pod's sidecar instead of being
// refused here, with the annotation named.
func refuseBindings(pod *corev1.Pod) field.ErrorList {
	annotations := field.NewPath("metadata", "annotations")
	var errs field.ErrorList
	if roles, ok := pod.Annotations[v1alpha1.AnnotationRoles]; ok {
		if _, err := sidecar.ParseRoles(roles); err != nil {
			errs = append(errs, field.Invalid(annotations.Key(v1alpha1.AnnotationRoles), roles,
				fmt.Sprintf("%v (roles are comma separated, e.g. ci,analyst; empty binds none)", err)))
		}
	}
	if env, ok := pod.Annotations[v1alpha1.AnnotationEnvironment]; ok {
		if err := sidecar.CheckBindingName(env); err != nil {
			errs = append(errs, field.Invalid(annotations.Key(v1alpha1.AnnotationEnvironment), env,
				fmt.Sprintf("%v (one environment, e.g. prod; remove the annotation to bind none)", err)))
		}
	}
	return errs
}
