package webhook

import (
	"fmt"
	"net/url"
	"path"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// AnnotationMCPUpstreams on an injected Pod makes its sidecar an MCP proxy:
// "NAME=URL[;secret=SECRET[/KEY]]", several separated by commas. Each
// upstream is served to the agent at http://127.0.0.1:8182/mcp/NAME (and on
// the sidecar's socket), every tools/call decided before it is forwarded;
// SECRET's KEY (default "header") holds one header line, e.g.
// "Authorization: Bearer ...", that the sidecar adds to every upstream
// request. The Secret is mounted into the sidecar container only.
const AnnotationMCPUpstreams = "toolgate.dev/mcp-upstreams"

const (
	// mcpVolumePrefix names the volume of each upstream's Secret; a Pod
	// may not declare one of its own.
	mcpVolumePrefix = "toolgate-mcp-"
	mcpSecretDir    = "/var/run/secrets/toolgate-mcp"
	mcpDefaultKey   = "header"
	// maxMCPName keeps the volume name a DNS label.
	maxMCPName = validation.DNS1123LabelMaxLength - len(mcpVolumePrefix)
)

type mcpAnnotated struct {
	name, url   string
	secret, key string // secret "" without a credential
}

// parseMCPUpstreams reads the annotation; every problem is reported, each
// naming the entry.
func parseMCPUpstreams(v string) ([]mcpAnnotated, field.ErrorList) {
	p := field.NewPath("metadata", "annotations").Key(AnnotationMCPUpstreams)
	var errs field.ErrorList
	bad := func(entry, why string) { errs = append(errs, field.Invalid(p, entry, why)) }
	var out []mcpAnnotated
	seen := map[string]bool{}
	for _, entry := range strings.Split(v, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		parts := strings.Split(entry, ";")
		name, raw, ok := strings.Cut(strings.TrimSpace(parts[0]), "=")
		if !ok {
			bad(entry, `want NAME=URL[;secret=SECRET[/KEY]], entries separated by commas`)
			continue
		}
		u := mcpAnnotated{name: name, url: raw}
		if msgs := validation.IsDNS1123Label(name); len(msgs) > 0 || len(name) > maxMCPName {
			bad(entry, fmt.Sprintf("NAME %q must be a DNS label of at most %d characters", name, maxMCPName))
			continue
		}
		if seen[name] {
			bad(entry, fmt.Sprintf("NAME %q is given twice", name))
			continue
		}
		seen[name] = true
		if parsed, err := url.Parse(raw); err != nil || (parsed.Scheme != "http" && parsed.Scheme != "https") || parsed.Host == "" || parsed.User != nil {
			// The entry is shown redacted: an error must not repeat a password.
			bad(name+"="+redactURL(raw), "the URL must be http(s)://host/path, without credentials (put those in a Secret: ;secret=NAME)")
			continue
		}
		okOpts := true
		for _, opt := range parts[1:] {
			k, val, _ := strings.Cut(strings.TrimSpace(opt), "=")
			if k != "secret" || u.secret != "" {
				bad(entry, fmt.Sprintf("option %q: the only option is secret=SECRET[/KEY], once", opt))
				okOpts = false
				break
			}
			u.secret, u.key, _ = strings.Cut(val, "/")
			if u.key == "" {
				u.key = mcpDefaultKey
			}
			if msgs := validation.IsDNS1123Subdomain(u.secret); len(msgs) > 0 {
				bad(entry, fmt.Sprintf("secret %q is not a Secret name: %s", u.secret, strings.Join(msgs, "; ")))
				okOpts = false
			} else if msgs := validation.IsConfigMapKey(u.key); len(msgs) > 0 {
				bad(entry, fmt.Sprintf("key %q is not a Secret key: %s", u.key, strings.Join(msgs, "; ")))
				okOpts = false
			}
		}
		if okOpts {
			out = append(out, u)
		}
	}
	if len(out) == 0 && len(errs) == 0 {
		bad(v, "names no upstream; remove the annotation or give NAME=URL")
	}
	return out, errs
}

func redactURL(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	return "(unparseable)"
}

// refuseMCP refuses a malformed annotation, and a Pod whose other
// containers could read an upstream's Secret: the point of the pattern is
// that only the sidecar holds the credential.
func refuseMCP(pod *corev1.Pod) error {
	v, ok := pod.Annotations[AnnotationMCPUpstreams]
	if !ok {
		return nil
	}
	ups, errs := parseMCPUpstreams(v)
	return podInvalid(pod, append(errs, refuseCredentialReaders(pod, ups)...))
}

// refuseCredentialReaders refuses a Pod whose containers could read an
// upstream's credential Secret, or that declares a volume name the
// injector reserves for one.
func refuseCredentialReaders(pod *corev1.Pod, ups []mcpAnnotated) field.ErrorList {
	var errs field.ErrorList
	secrets := map[string]bool{}
	for _, u := range ups {
		if u.secret != "" {
			secrets[u.secret] = true
		}
	}
	for i, vol := range pod.Spec.Volumes {
		if strings.HasPrefix(vol.Name, mcpVolumePrefix) {
			errs = append(errs, field.Forbidden(field.NewPath("spec", "volumes").Index(i).Child("name"),
				fmt.Sprintf("volume names starting %q are reserved for the MCP upstream credentials the injector mounts into the sidecar", mcpVolumePrefix)))
		}
	}
	return append(errs, refuseCredentialReads(pod, secrets, func(containerList, *corev1.Container) bool { return true })...)
}

// credentialSecrets are the Secrets the injector mounted into pod's
// sidecar: those of its toolgate-mcp-* volumes.
func credentialSecrets(pod *corev1.Pod) map[string]bool {
	secrets := map[string]bool{}
	for _, vol := range pod.Spec.Volumes {
		if strings.HasPrefix(vol.Name, mcpVolumePrefix) && vol.Secret != nil {
			secrets[vol.Secret.SecretName] = true
		}
	}
	return secrets
}

// refuseCredentialReads refuses the containers of pod that checked selects
// and that read one of secrets: through env, envFrom, or a mount of any
// volume of the Pod holding one (declared under another name too).
func refuseCredentialReads(pod *corev1.Pod, secrets map[string]bool, checked func(containerList, *corev1.Container) bool) field.ErrorList {
	if len(secrets) == 0 {
		return nil
	}
	var errs field.ErrorList
	secretVolumes := map[string]string{}
	for _, vol := range pod.Spec.Volumes {
		for _, s := range volumeSecrets(vol) {
			if secrets[s] {
				secretVolumes[vol.Name] = s
			}
		}
	}
	for _, list := range containerLists(pod) {
		for i, c := range list.containers {
			if c.Name == SidecarName || !checked(list, &c) {
				continue
			}
			cp := list.path.Index(i)
			for j, m := range c.VolumeMounts {
				if s, ok := secretVolumes[m.Name]; ok {
					errs = append(errs, field.Forbidden(cp.Child("volumeMounts").Index(j), fmt.Sprintf(
						"mounts Secret %q, an MCP upstream credential (%s): only the injected sidecar may hold it", s, AnnotationMCPUpstreams)))
				}
			}
			for j, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && secrets[e.ValueFrom.SecretKeyRef.Name] {
					errs = append(errs, field.Forbidden(cp.Child("env").Index(j), fmt.Sprintf(
						"reads Secret %q, an MCP upstream credential (%s): only the injected sidecar may hold it", e.ValueFrom.SecretKeyRef.Name, AnnotationMCPUpstreams)))
				}
			}
			for j, e := range c.EnvFrom {
				if e.SecretRef != nil && secrets[e.SecretRef.Name] {
					errs = append(errs, field.Forbidden(cp.Child("envFrom").Index(j), fmt.Sprintf(
						"reads Secret %q, an MCP upstream credential (%s): only the injected sidecar may hold it", e.SecretRef.Name, AnnotationMCPUpstreams)))
				}
			}
		}
	}
	return errs
}

func volumeSecrets(v corev1.Volume) []string {
	var out []string
	if v.Secret != nil {
		out = append(out, v.Secret.SecretName)
	}
	if v.Projected != nil {
		for _, s := range v.Projected.Sources {
			if s.Secret != nil {
				out = append(out, s.Secret.Name)
			}
		}
	}
	return out
}

// EnvMCPURL tells the agent's containers where the proxy serves the
// upstreams: "${TOOLGATE_MCP_URL}NAME" is upstream NAME.
const (
	EnvMCPURL     = "TOOLGATE_MCP_URL"
	defaultMCPURL = "http://127.0.0.1:8182/mcp/"
)

// injectMCP adds each upstream to the sidecar's arguments and mounts its
// Secret into the sidecar alone, and points the Pod's other containers at
// the proxy (where they do not set EnvMCPURL in env themselves). The
// upstreams were checked (refuseMCP, resolveRegistered).
func injectMCP(pod *corev1.Pod, c *corev1.Container, ups []mcpAnnotated) {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if !slices.ContainsFunc(list[i].Env, func(e corev1.EnvVar) bool { return e.Name == EnvMCPURL }) {
				list[i].Env = append(list[i].Env, corev1.EnvVar{Name: EnvMCPURL, Value: defaultMCPURL})
			}
		}
	}
	readable := int32(0o444) // the sidecar runs as its own user; no other container mounts it
	for _, u := range ups {
		c.Args = append(c.Args, "--mcp-upstream="+u.name+"="+u.url)
		if u.secret == "" {
			continue
		}
		vol := mcpVolumePrefix + u.name
		dir := path.Join(mcpSecretDir, u.name)
		c.Args = append(c.Args, "--mcp-upstream-auth="+u.name+"="+path.Join(dir, mcpDefaultKey))
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: vol, MountPath: dir, ReadOnly: true})
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: vol, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
			SecretName: u.secret, DefaultMode: &readable,
			Items: []corev1.KeyToPath{{Key: u.key, Path: mcpDefaultKey}}}}})
	}
}
