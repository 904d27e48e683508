package sidecar

import (
	"fmt"
	"strings"
)

// Bounds on --roles and --environment (and the Pod annotations the
// injector turns into them).
const (
	maxRoles       = 64
	maxBindingName = 253
)

// ParseRoles reads a --roles value: role names separated by commas. ""
// is no roles at all (which still binds: a request's own roles are then
// replaced by none).
func ParseRoles(s string) ([]string, error) {
	if s == "" {
		return []string{}, nil
	}
	roles := strings.Split(s, ",")
	if len(roles) > maxRoles {
		return nil, fmt.Errorf("%d roles, more than %d", len(roles), maxRoles)
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
	case len(s) > maxBindingName:
		return fmt.Errorf("%q is %d bytes long, more than %d", s[:32]+"...", len(s), maxBindingName)
	}
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-_.:/@", c) >= 0) {
			return fmt.Errorf("%q holds %q: a name may hold only letters, digits and - _ . : / @", s, c)
		}
	}
	return nil
}

// rolesFlag binds --roles to Options.Roles: nil when the flag is not
// given, so the request's own roles are used.
type rolesFlag struct{ roles *[]string }

func (f rolesFlag) String() string {
	if f.roles == nil || *f.roles == nil {
		return ""
	}
	return strings.Join(*f.roles, ",")
}

func (f rolesFlag) Set(s string) error {
	roles, err := ParseRoles(s)
	if err != nil {
		return err
	}
	*f.roles = roles
	return nil
}

func (rolesFlag) Type() string { return "role,role" }
