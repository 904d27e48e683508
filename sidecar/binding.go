package sidecar

import (
	"strings"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

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
	roles, err := v1alpha1.ParseRoles(s)
	if err != nil {
		return err
	}
	*f.roles = roles
	return nil
}

func (rolesFlag) Type() string { return "role,role" }
