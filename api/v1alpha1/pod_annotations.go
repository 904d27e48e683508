package v1alpha1

import (
	"fmt"
	"strings"
)

// The Pod annotations that drive sidecar injection. The webhook refuses a
// Pod whose roles or environment annotation the sidecar would refuse as
// --roles or --environment (ParseRoles, CheckBindingName), so the grammar
// of their values lives here, beside the keys.
const (
	// AnnotationInject on a Pod asks for the sidecar.
	AnnotationInject = "toolgate.dev/inject"
	// AnnotationAgentID on a Pod names its agent (default: its service account).
	AnnotationAgentID = "toolgate.dev/agent-id"
	// AnnotationRoles on a Pod names its agent's roles, comma separated
	// (the sidecar's --roles): they replace whatever roles a request
	// claims; an empty value binds no roles. Absent: requests' own roles.
	AnnotationRoles = "toolgate.dev/roles"
	// AnnotationEnvironment on a Pod names the environment its agent runs
	// in, e.g. prod (the sidecar's --environment).
	AnnotationEnvironment = "toolgate.dev/environment"
)

// Bounds on AnnotationRoles and AnnotationEnvironment (and the sidecar's
// --roles and --environment they become).
const (
	MaxRoles       = 64
	MaxBindingName = 253
)

// ParseRoles reads an AnnotationRoles value (a --roles value): role names
// separated by commas. "" is no roles at all (which still binds: a
// request's own roles are then replaced by none).
func ParseRoles(s string) ([]string, error) {
	if s == "" {
		return []string{}, nil
	}
	roles := strings.Split(s, ",")
	if len(roles) > MaxRoles {
		return nil, fmt.Errorf("%d roles, more than %d", len(roles), MaxRoles)
	}
	for i, r := range roles {
		if err := CheckBindingName(r); err != nil {
			return nil, fmt.Errorf("role %d of %q: %w", i+1, s, err)
		}
	}
	return roles, nil
}

// CheckBindingName checks one role or environment name. The character
// set is narrow on purpose: the names travel through Pod annotations into
// container args, where kubelet would expand $(VAR), and a space or comma
// would be a typo.
func CheckBindingName(s string) error {
	switch {
	case s == "":
		return fmt.Errorf("a name is empty")
	case len(s) > MaxBindingName:
		return fmt.Errorf("%q is %d bytes long, more than %d", s[:32]+"...", len(s), MaxBindingName)
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.:/@", c) >= 0) {
			return fmt.Errorf("%q holds %q: a name may hold only letters, digits and - _ . : / @", s, c)
		}
	}
	return nil
}
