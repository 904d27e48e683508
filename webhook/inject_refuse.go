package webhook

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// refuseInjection returns why an annotated Pod must not be admitted: it
// declares its own toolgate-sidecar container (one the injector did not
// write: any --agent-id, --service-account, bundle or none at all), or it
// declares or mounts the volumes the injector gives the sidecar alone (its
// API token and its bundle cache, which another container could read or
// poison, and the socket's directory, which it could make writable), a
// container runs as the sidecar's user, or its containers would see the
// sidecar's process (refuseSharedProcesses). Skipping such a Pod silently, as
// the injector once did, let a Pod author pick the guard that guards them.
func refuseInjection(pod *corev1.Pod, sidecarUID int64) error {
	var errs field.ErrorList
	for _, list := range containerLists(pod) {
		for i := range list.containers {
			errs = append(errs, refuseContainer(list.path.Index(i), &list.containers[i])...)
		}
	}
	errs = append(errs, refuseSidecarUser(pod, sidecarUID, func(containerList, *corev1.Container) bool { return true })...)
	errs = append(errs, refuseBindings(pod)...)
	errs = append(errs, refuseSharedProcesses(pod)...)
	for i, v := range pod.Spec.Volumes {
		if what, ok := reservedVolumes[v.Name]; ok {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "volumes").Index(i).Child("name"), fmt.Sprintf(
				"volume name %q is reserved for %s, which the injector adds", v.Name, what)))
		}
	}
	return podInvalid(pod, errs)
}

// refuseSharedProcesses refuses a Pod whose containers would see the
// sidecar's process: one sharing its process namespace, or the node's. The
// sidecar holds the MCP upstream credentials and its API token; another
// container running as its user (an image's own USER, which admission
// cannot see) or as root with CAP_SYS_PTRACE would read its environment
// through /proc/PID/environ and its files through /proc/PID/root, whatever
// volumes it mounts. The sidecar also makes itself non-dumpable, which
// stops the first and not the second.
func refuseSharedProcesses(pod *corev1.Pod) field.ErrorList {
	const why = "the injected %s container holds the MCP upstream credentials and its API token, which a container seeing its process " +
		"reads through /proc/PID/environ and /proc/PID/root (as the sidecar's user, or as root with CAP_SYS_PTRACE); %s"
	var errs field.ErrorList
	if s := pod.Spec.ShareProcessNamespace; s != nil && *s {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "shareProcessNamespace"),
			fmt.Sprintf(why, SidecarName, "an injected Pod may not share its process namespace (remove it, or debug with kubectl debug --target=CONTAINER)")))
	}
	if pod.Spec.HostPID {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "hostPID"),
			fmt.Sprintf(why, SidecarName, "an injected Pod may not use the node's process namespace")))
	}
	return errs
}

// reservedVolumes are the volumes the injector gives the sidecar alone.
var reservedVolumes = map[string]string{
	tokenVolumeName:  "the sidecar's API token",
	cacheVolumeName:  "the sidecar's bundle cache",
	socketVolumeName: "the sidecar's decision socket directory (read-only in other containers)",
	// Declared only with reports on; reserved always, so a Pod admitted
	// before reports were turned on cannot hold the name.
	reportsTokenVolumeName: "the sidecar's token for the operator's reports endpoint",
	usageStoreVolumeName:   "the sidecar's password for the shared usage store",
}

// reservedVolume says whose a volume name is, if the injector reserves it:
// the sidecar's own volumes, and an MCP upstream's credential (which the
// injector declares after admission, so mounting it undeclared is enough).
func reservedVolume(name string) (string, bool) {
	if what, ok := reservedVolumes[name]; ok {
		return what, true
	}
	if strings.HasPrefix(name, mcpVolumePrefix) {
		return "an MCP upstream's credential (" + AnnotationMCPUpstreams + ")", true
	}
	return "", false
}

// containerList is one of a Pod's lists of containers, with its field path.
type containerList struct {
	path       *field.Path
	containers []corev1.Container
	ephemeral  bool
}

// containerLists are the Pod's init containers, containers and ephemeral
// containers. The ephemeral ones are copies: an EphemeralContainerCommon
// is a Container field for field, so one set of rules reads all three.
func containerLists(pod *corev1.Pod) []containerList {
	spec := field.NewPath("spec")
	ephemeral := make([]corev1.Container, len(pod.Spec.EphemeralContainers))
	for i, ec := range pod.Spec.EphemeralContainers {
		ephemeral[i] = corev1.Container(ec.EphemeralContainerCommon)
	}
	return []containerList{{spec.Child("initContainers"), pod.Spec.InitContainers, false},
		{spec.Child("containers"), pod.Spec.Containers, false}, {spec.Child("ephemeralContainers"), ephemeral, true}}
}

// refuseContainer returns why c, at p, may not run beside the injected
// sidecar: it takes the sidecar's name, or mounts one of its volumes.
func refuseContainer(p *field.Path, c *corev1.Container) field.ErrorList {
	if c.Name == SidecarName {
		return field.ErrorList{field.Forbidden(p.Child("name"), fmt.Sprintf(
			"%q is the container toolgate injects; a Pod annotated for injection may not declare its own (remove it and let the injector add it)", SidecarName))}
	}
	var errs field.ErrorList
	for j, m := range c.VolumeMounts {
		if what, ok := reservedVolume(m.Name); ok {
			errs = append(errs, field.Forbidden(p.Child("volumeMounts").Index(j).Child("name"), fmt.Sprintf(
				"volume %q is %s: only the injected %s container may mount it", m.Name, what, SidecarName)))
		}
	}
	return errs
}

// refuseSidecarUser refuses the containers of pod that checked selects and
// that would run as the sidecar's user, uid: one that sets it, and the
// Pod's securityContext when a container inherits it there. As that user a container could, in
// a Pod sharing its process namespace, signal or trace the sidecar and
// reach its writable socket directory through /proc/PID/root. Only
// runAsUser is known at admission: an image's own USER is not (pick a
// --sidecar-uid no agent image uses).
func refuseSidecarUser(pod *corev1.Pod, uid int64, checked func(containerList, *corev1.Container) bool) field.ErrorList {
	var errs field.ErrorList
	var inheriting []string
	for _, list := range containerLists(pod) {
		for i, c := range list.containers {
			if c.Name == SidecarName || !checked(list, &c) {
				continue
			}
			switch sc := c.SecurityContext; {
			case sc != nil && sc.RunAsUser != nil:
				if *sc.RunAsUser == uid {
					errs = append(errs, field.Forbidden(list.path.Index(i).Child("securityContext", "runAsUser"), sidecarUserMessage(uid)))
				}
			case pod.Spec.SecurityContext != nil && pod.Spec.SecurityContext.RunAsUser != nil && *pod.Spec.SecurityContext.RunAsUser == uid:
				inheriting = append(inheriting, list.path.Index(i).String())
			}
		}
	}
	if len(inheriting) > 0 {
		errs = append(errs, field.Forbidden(field.NewPath("spec", "securityContext", "runAsUser"), fmt.Sprintf(
			"%s, and %s run as it (set another runAsUser on them, or here)", sidecarUserMessage(uid), strings.Join(inheriting, ", "))))
	}
	return errs
}

func sidecarUserMessage(uid int64) string {
	return fmt.Sprintf("%d is the injected %s container's user: no other container may run as it (it could signal, trace or replace the sidecar's socket)", uid, SidecarName)
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
		if _, err := v1alpha1.ParseRoles(roles); err != nil {
			errs = append(errs, field.Invalid(annotations.Key(v1alpha1.AnnotationRoles), roles,
				fmt.Sprintf("%v (roles are comma separated, e.g. ci,analyst; empty binds none)", err)))
		}
	}
	if env, ok := pod.Annotations[v1alpha1.AnnotationEnvironment]; ok {
		if err := v1alpha1.CheckBindingName(env); err != nil {
			errs = append(errs, field.Invalid(annotations.Key(v1alpha1.AnnotationEnvironment), env,
				fmt.Sprintf("%v (one environment, e.g. prod; remove the annotation to bind none)", err)))
		}
	}
	return errs
}
