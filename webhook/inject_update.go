package webhook

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/toolgate/toolgate/endpoint"
)

// ephemeralSubresource is how kubectl debug adds containers to a running
// Pod: an update of the Pod's ephemeral containers, which never goes
// through the Pod's own CREATE.
const ephemeralSubresource = "ephemeralcontainers"

// admitUpdate guards an injected Pod after its creation. Of its
// containers, an update may change the images, and kubectl debug may add
// ephemeral containers (admitEphemeral); the webhook's matchConditions
// send it no other update, and only for Pods that carry the sidecar as
// stored. What it reads of the Pod is req.OldObject, the Pod as stored,
// never the update's body: a Pod author can change labels and annotations
// before, or with, the update.
func admitUpdate(req admission.Request, pod *corev1.Pod, defaultUID int64) error {
	var stored corev1.Pod
	if err := json.Unmarshal(req.OldObject.Raw, &stored); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("reading the stored Pod of an update: %v", err))
	}
	sidecar := sidecarIn(&stored)
	if sidecar == nil {
		return nil
	}
	switch req.SubResource {
	case "":
		return refuseSidecarImageChange(pod, sidecar.Image)
	case ephemeralSubresource:
		return admitEphemeral(&stored, sidecar, pod, defaultUID)
	}
	return nil
}

// refuseSidecarImageChange refuses an update of pod that gives the sidecar
// another image than image: kubelet would restart it from that image with
// the injected arguments, and anything there could answer allow. The
// agent's own images may change.
func refuseSidecarImageChange(pod *corev1.Pod, image string) error {
	var errs field.ErrorList
	for _, list := range containerLists(pod) {
		for i, c := range list.containers {
			if c.Name == SidecarName && c.Image != image {
				errs = append(errs, field.Forbidden(list.path.Index(i).Child("image"), fmt.Sprintf(
					"the injected %s container's image cannot change on a running Pod (it is %s); recreate the Pod to have a newer sidecar injected", SidecarName, image)))
			}
		}
	}
	return podInvalid(pod, errs)
}

// admitEphemeral guards the ephemeral containers an update adds to stored,
// an injected Pod whose sidecar is sidecar: each follows the rules of the
// Pod's own containers (refuseContainer, refuseSidecarUser), may not
// target the sidecar, and gets the socket read-only and TOOLGATE_URL
// (pointAtSidecar), so that kubectl debug cannot take the socket over.
// The API server keeps nothing of such an update but its ephemeral
// containers: everything else is read from stored.
func admitEphemeral(stored *corev1.Pod, sidecar *corev1.Container, pod *corev1.Pod, defaultUID int64) error {
	had := map[string]bool{}
	for _, ec := range stored.Spec.EphemeralContainers {
		had[ec.Name] = true
	}
	// What the API server will store: the Pod as it is, with these
	// ephemeral containers (the ones it had cannot change).
	merged := stored.DeepCopy()
	merged.Spec.EphemeralContainers = pod.Spec.EphemeralContainers
	uid := defaultUID
	if sc := sidecar.SecurityContext; sc != nil && sc.RunAsUser != nil {
		uid = *sc.RunAsUser
	}
	if err := refuseEphemeral(merged, had, uid); err != nil {
		return err
	}
	socket, listen := injectedListeners(stored, sidecar)
	for i := range pod.Spec.EphemeralContainers {
		ec := &pod.Spec.EphemeralContainers[i]
		if had[ec.Name] {
			continue
		}
		c := corev1.Container(ec.EphemeralContainerCommon)
		pointAtSidecar(&c, socket, listen)
		ec.EphemeralContainerCommon = corev1.EphemeralContainerCommon(c)
	}
	return nil
}

// refuseEphemeral returns why the ephemeral containers of pod that it did
// not have before (had) may not run beside the sidecar running as uid:
// the rules of the Pod's own containers, the sidecar's process namespace,
// and the MCP upstream credentials mounted into the sidecar.
func refuseEphemeral(pod *corev1.Pod, had map[string]bool, uid int64) error {
	var errs field.ErrorList
	for i, ec := range pod.Spec.EphemeralContainers {
		if had[ec.Name] {
			continue
		}
		p := field.NewPath("spec", "ephemeralContainers").Index(i)
		c := corev1.Container(ec.EphemeralContainerCommon)
		errs = append(errs, refuseContainer(p, &c)...)
		// It would share the sidecar's process namespace (kubectl debug
		// --target), and with CAP_SYS_PTRACE (--profile=general) reach its
		// files through /proc/PID/root as any user.
		if ec.TargetContainerName == SidecarName {
			errs = append(errs, field.Forbidden(p.Child("targetContainerName"), fmt.Sprintf(
				"%q is the container toolgate injects: an ephemeral container may not join its process namespace (target the agent's container instead)", SidecarName)))
		}
	}
	added := func(list containerList, c *corev1.Container) bool { return list.ephemeral && !had[c.Name] }
	errs = append(errs, refuseSidecarUser(pod, uid, added)...)
	// The credential the sidecar alone holds: read through env or
	// envFrom, or through a volume of its Secret the Pod declared and
	// none of its own containers mounts.
	errs = append(errs, refuseCredentialReads(pod, credentialSecrets(pod), added)...)
	return podInvalid(pod, errs)
}

// injectedListeners reads back, from the sidecar's arguments, where the
// injector that wrote it told it to answer: that manager's options, which
// need not be this one's. Without the socket's volume there is no socket.
func injectedListeners(pod *corev1.Pod, sidecar *corev1.Container) (socket, listen string) {
	for _, a := range sidecar.Args {
		v, ok := strings.CutPrefix(a, "--listen=")
		if !ok {
			continue
		}
		// The injector writes a socket as endpoint.UnixURL: read that back.
		if s, ok := strings.CutPrefix(v, endpoint.UnixURL("")); ok {
			socket = s
		} else {
			listen = v
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.Name == socketVolumeName {
			return socket, listen
		}
	}
	return "", listen
}
