package freeze

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// waitMode is what `toolgate freeze --wait` waits for.
type waitMode string

const (
	// waitSidecars (the default, and --wait alone): the operator's
	// Enforced=True, every live sidecar the freeze selects applies it.
	waitSidecars waitMode = "sidecars"
	// waitOperator: the operator's Ready=True, the freeze is in the
	// bundle (what --wait meant before sidecars reported).
	waitOperator waitMode = "operator"
	// waitNone: create and return.
	waitNone waitMode = "none"
)

// Set reads --wait's value; true and false stay for scripts written when
// --wait was a boolean.
func (m *waitMode) Set(s string) error {
	switch s {
	case string(waitSidecars), "true":
		*m = waitSidecars
	case string(waitOperator):
		*m = waitOperator
	case string(waitNone), "false":
		*m = waitNone
	default:
		return fmt.Errorf("%q is not a wait mode: want sidecars (every sidecar applies the freeze; the default, and --wait alone), operator (the operator published it) or none", s)
	}
	return nil
}

func (m *waitMode) String() string { return string(*m) }

func (m *waitMode) Type() string { return "mode" }

// confirmation is what the wait saw when it ended: the freeze's bundle
// revision (a FrozenAgent's), and, waiting for sidecars, their count.
type confirmation struct {
	revision    string
	enforcement *v1alpha1.EnforcementStatus
	noSidecars  bool
}

// sidecarsApply tells whether the operator reports every live sidecar
// applying the freeze at generation (its Enforced condition); if not,
// last says how far it got and which Pod it waits for.
func sidecarsApply(conds []metav1.Condition, generation int64, st *v1alpha1.EnforcementStatus, last *string) (confirmation, bool) {
	enforced := meta.FindStatusCondition(conds, v1alpha1.ConditionEnforced)
	switch {
	case enforced == nil || enforced.ObservedGeneration != generation:
		*last = "published; no sidecar confirmation yet (an operator without the Enforced condition never gives one: use --wait=operator)"
	case enforced.Status == metav1.ConditionTrue:
		return confirmation{enforcement: st, noSidecars: enforced.Reason == v1alpha1.ReasonNoSidecars}, true
	default:
		applied := ""
		if st != nil {
			applied = fmt.Sprintf("applied by %s sidecars; ", st.Summary)
		}
		*last = applied + enforced.Reason + ": " + enforced.Message
	}
	return confirmation{}, false
}

// describe is how the command reports the freeze confirmed.
func (c confirmation) describe(mode waitMode, published string, took time.Duration) string {
	ms := took.Milliseconds()
	switch {
	case mode == waitOperator:
		return fmt.Sprintf("the operator confirmed it %s after %d ms", published, ms)
	case c.noSidecars || c.enforcement == nil:
		return fmt.Sprintf("the operator confirmed it %s after %d ms; no live sidecar to apply it", published, ms)
	}
	return fmt.Sprintf("applied by %s sidecars in %s (%s)", c.enforcement.Summary, took.Round(time.Millisecond), published)
}

// addWaitFlag adds --wait: a mode, whose bare form (--wait) is sidecars.
func addWaitFlag(cmd *cobra.Command, mode *waitMode) {
	cmd.Flags().Var(mode, "wait", "what to wait for: sidecars (every live sidecar applies the freeze, as the operator reads their Leases), operator (the operator published it) or none; --wait alone is sidecars, true and false mean sidecars and none")
	cmd.Flags().Lookup("wait").NoOptDefVal = string(waitSidecars)
}
