// Package approve is the CLI for people who decide approvals:
// `toolgate approve NAME` and `toolgate deny NAME -m MSG` write the decision
// into an ApprovalRequest's status as the caller (who the API server says
// they are), and `toolgate approvals list [-w]` shows what waits. RBAC and
// the approvals admission policy decide who may; these commands only make
// the write easy and its refusals clear.
package approve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/internal/exitcode"
	"github.com/toolgate/toolgate/internal/kubeconn"
)

// Exit codes: 1 when the cluster did not take the decision (not found,
// already decided, expired, refused), 2 for a command that could not run.
func usage(format string, args ...any) error { return exitcode.Usagef(format, args...) }

func notDone(format string, args ...any) error { return exitcode.Problemsf(format, args...) }

type decideOptions struct {
	conn    kubeconn.Flags
	message string
	now     func() time.Time
}

// NewApproveCommand returns `toolgate approve`.
func NewApproveCommand() *cobra.Command {
	return newDecideCommand("approve", v1alpha1.ApprovalApproved)
}

// NewDenyCommand returns `toolgate deny`.
func NewDenyCommand() *cobra.Command {
	return newDecideCommand("deny", v1alpha1.ApprovalDenied)
}

func newDecideCommand(verb string, decision v1alpha1.ApprovalDecision) *cobra.Command {
	o := decideOptions{now: time.Now}
	cmd := &cobra.Command{
		Use:  verb + " NAME [-m MESSAGE]",
		Args: exactlyOneName,
		RunE: func(cmd *cobra.Command, args []string) error {
			if decision == v1alpha1.ApprovalDenied && strings.TrimSpace(o.message) == "" {
				return usage("deny needs -m MESSAGE: the agent is told why its call was refused")
			}
			return runDecide(cmd.Context(), cmd.OutOrStdout(), &o, args[0], decision)
		},
	}
	if decision == v1alpha1.ApprovalApproved {
		cmd.Short = "Approve the one tool call an ApprovalRequest holds, as yourself"
		cmd.Long = `Approve ApprovalRequest NAME: the call it holds (that agent, tool, server, action and exact
arguments) may run once. The decision is written into the request's status with your user name
as the API server knows you (a SelfSubjectReview), and the time; -m adds a word for the agent.

Who may approve is RBAC's and the approvals admission policy's to say: a namespace's admins
and whoever is bound to the toolgate-approver ClusterRole, never a ServiceAccount unless the
cluster allows it, never the agent that asked (docs/approvals.md#who-can-approve).

Exit status: 0 approved, 1 not approved (no such request, already decided, expired, refused),
2 the command could not run.`
		cmd.Example = `  toolgate approve approval-7f3c2 -n agents
  toolgate approve approval-7f3c2 -n agents -m "refund for order 1182, checked"`
	} else {
		cmd.Short = "Deny the tool call an ApprovalRequest holds, as yourself, saying why"
		cmd.Long = `Deny ApprovalRequest NAME: the call it holds is refused with APPROVAL_DENIED and your
message, which -m must give. The decision is written into the request's status with your user
name as the API server knows you (a SelfSubjectReview), and the time.

Exit status: 0 denied, 1 not denied (no such request, already decided, expired, refused),
2 the command could not run.`
		cmd.Example = `  toolgate deny approval-7f3c2 -n agents -m "amount is over the quarter's budget"`
	}
	o.conn.Add(cmd, "the ApprovalRequest's namespace")
	cmd.Flags().StringVarP(&o.message, "message", "m", "", "a word for the agent: returned with the decision (required for deny)")
	return cmd
}

func exactlyOneName(_ *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usage("give exactly one ApprovalRequest name, not %d arguments (toolgate approvals list shows them)", len(args))
	}
	if msgs := validation.IsDNS1123Subdomain(args[0]); len(msgs) > 0 {
		return usage("%q is not an ApprovalRequest name: %s", args[0], msgs[0])
	}
	return nil
}

func (o *decideOptions) validate() error {
	if n := utf8.RuneCountInString(o.message); n > v1alpha1.MaxApprovalMessageLength {
		return usage("-m is %d characters long: at most %d", n, v1alpha1.MaxApprovalMessageLength)
	}
	return o.conn.CheckNamespace()
}

func runDecide(ctx context.Context, out io.Writer, o *decideOptions, name string, decision v1alpha1.ApprovalDecision) error {
	if err := o.validate(); err != nil {
		return err
	}
	c, ns, err := o.conn.Client(v1alpha1.AddToScheme, authenticationv1.AddToScheme)
	if err != nil {
		return err
	}
	me, err := whoAmI(ctx, c)
	if err != nil {
		return err
	}
	key := client.ObjectKey{Namespace: ns, Name: name}
	var ar v1alpha1.ApprovalRequest
	// The operator writes conditions, so the request may change between
	// reading and writing it: then read it again and, while it is still
	// undecided, decide again. An update, not a patch: it carries the
	// resourceVersion read, so a decision someone made meanwhile fails it
	// as a conflict, and the next read says whose, instead of it being
	// overwritten.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := c.Get(ctx, key, &ar); err != nil {
			return readError(key, err)
		}
		if err := decidable(&ar, o.now()); err != nil {
			return err
		}
		now := metav1.NewTime(o.now().UTC().Truncate(time.Second))
		ar.Status.Decision = decision
		ar.Status.DecidedBy = me
		ar.Status.DecidedAt = &now
		ar.Status.Message = o.message
		return c.Status().Update(ctx, &ar)
	})
	if err != nil {
		return writeError(key, me, err)
	}
	fmt.Fprintf(out, "approvalrequest %s/%s %s by %s: %s\n", ns, name, strings.ToLower(string(decision)), me, describeCall(&ar, decision))
	return nil
}

// whoAmI is the caller's user name as the API server authenticates them:
// what the admission policy compares decidedBy with, whatever the
// kubeconfig calls its user (impersonation included).
func whoAmI(ctx context.Context, c client.Client) (string, error) {
	review := &authenticationv1.SelfSubjectReview{}
	if err := c.Create(ctx, review); err != nil {
		return "", notDone("asking the API server who you are (SelfSubjectReview, authentication.k8s.io/v1): %v", err)
	}
	if review.Status.UserInfo.Username == "" {
		return "", notDone("the API server knows you by no user name (SelfSubjectReview): a decision must say who made it")
	}
	return review.Status.UserInfo.Username, nil
}

// decidable refuses, before any write, a request that is already decided
// (saying by whom) or past its expiry.
func decidable(ar *v1alpha1.ApprovalRequest, now time.Time) error {
	what := ar.Namespace + "/" + ar.Name
	if s := ar.Status; s.Decision != "" {
		when := ""
		if s.DecidedAt != nil {
			when = " at " + s.DecidedAt.UTC().Format(time.RFC3339)
		}
		note := ""
		if s.Message != "" {
			note = fmt.Sprintf(" (%q)", s.Message)
		}
		return notDone("ApprovalRequest %s is already %s by %s%s%s: a decision is final", what, s.Decision, s.DecidedBy, when, note)
	}
	if exp := ar.Spec.ExpiresAt.Time; !now.Before(exp) {
		return notDone("ApprovalRequest %s expired %s ago (at %s): the call it held was denied APPROVAL_TIMEOUT, and no decision is accepted now",
			what, duration.HumanDuration(now.Sub(exp)), exp.UTC().Format(time.RFC3339))
	}
	return nil
}

func readError(key client.ObjectKey, err error) error {
	switch {
	case apierrors.IsNotFound(err):
		return notDone("no ApprovalRequest %s in namespace %s (toolgate approvals list -n %s shows them; spent ones are deleted after a while)",
			key.Name, key.Namespace, key.Namespace)
	case apierrors.IsForbidden(err):
		return notDone("reading ApprovalRequest %s: refused by the API server: %s", key, apiMessage(err))
	}
	return notDone("reading ApprovalRequest %s: %v", key, err)
}

// writeError explains why the decision was not written: what decidable
// or the read said already (exitcode errors), the API server's own
// message when RBAC or the admission policy refused it, or conflicts
// that did not stop.
func writeError(key client.ObjectKey, me string, err error) error {
	var done *exitcode.Error
	switch {
	case errors.As(err, &done):
		return err
	case apierrors.IsConflict(err):
		return notDone("ApprovalRequest %s kept changing while deciding it; run the command again", key)
	case apierrors.IsForbidden(err), apierrors.IsInvalid(err):
		return notDone("the API server refused %s's decision on ApprovalRequest %s: %s", me, key, apiMessage(err))
	}
	return notDone("writing the decision on ApprovalRequest %s: %v", key, err)
}

// apiMessage is the API server's own words (RBAC's or the admission
// policy's), without client-side wrapping.
func apiMessage(err error) string {
	if s, ok := err.(apierrors.APIStatus); ok && s.Status().Message != "" {
		return s.Status().Message
	}
	return err.Error()
}

func describeCall(ar *v1alpha1.ApprovalRequest, decision v1alpha1.ApprovalDecision) string {
	who := ar.Spec.AgentID
	if who == "" {
		who = "ServiceAccount " + ar.Spec.ServiceAccount
	}
	if decision == v1alpha1.ApprovalApproved {
		return fmt.Sprintf("%s may call %s once, with exactly these arguments", who, ar.Spec.Tool)
	}
	return fmt.Sprintf("%s's call to %s is refused APPROVAL_DENIED", who, ar.Spec.Tool)
}
