// Package freeze is the kill switch from a terminal: `toolgate freeze AGENT`
// (or --service-account NAME, or --all for every agent of the namespace)
// creates the FrozenAgent and waits until the operator reports every
// sidecar applying it (or, --wait=operator, it live in the namespace's
// bundle); `toolgate unfreeze AGENT` deletes it.
package freeze

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/crdschema"
	"github.com/toolgate/toolgate/internal/exitcode"
)

// Exit codes: 1 when the cluster did not do what was asked (not live in
// time, nothing to unfreeze), 2 for a command that could not run.
func usage(format string, args ...any) error {
	return exitcode.Usagef(format, args...)
}

func notDone(format string, args ...any) error {
	return exitcode.Problemsf(format, args...)
}

type freezeOptions struct {
	conn    connection
	scope   clusterScope
	sa      string
	all     bool
	reason  string
	dur     time.Duration
	until   string
	name    string
	wait    waitMode
	timeout time.Duration
	now     func() time.Time
}

// NewFreezeCommand returns `toolgate freeze`.
func NewFreezeCommand() *cobra.Command {
	o := freezeOptions{wait: waitSidecars, timeout: 30 * time.Second, now: time.Now}
	cmd := &cobra.Command{
		Use:   "freeze [--all-namespaces [--selector LABELS]] AGENT_ID | --service-account NAME | --all",
		Short: "Deny every tool call of an agent in a namespace (creates a FrozenAgent) and wait until every sidecar applies it",
		Long: `Create a FrozenAgent for AGENT_ID in the namespace and, by default, wait until the operator
reports that every live sidecar of the namespace applies it (the FrozenAgent's Enforced condition,
read from the sidecars' Leases), and print how long that took: from then on each of them denies the
agent AGENT_FROZEN. --wait=operator waits only until the operator published it in the namespace's
bundle (Ready); --wait=none only creates it. Matching is case-insensitive. Freezing an agent that
already has a FrozenAgent of that name waits for that one. --all freezes every agent of the
namespace, whatever its id or ServiceAccount (allAgents: true).

--all-namespaces creates a ClusterFrozenAgent instead, the cluster's kill switch: the same freeze in
every namespace whose labels --selector matches (every namespace without it). Sidecars watch
ClusterFrozenAgents themselves, so it applies with the operator down; the command waits until every
sidecar of the selected namespaces applies it (--wait=operator: published to each of them).

Exit status: 0 applied (or live, with --wait=operator), 1 not confirmed within --timeout, 2 the
command could not run.`,
		Example: `  toolgate freeze billing-bot-7 -n agents --reason "INC-1234: looping on refunds"
  toolgate freeze billing-bot-7 -n agents --for 2h
  toolgate freeze --all -n agents --reason "INC-1234: stop everything"
  toolgate freeze --all-namespaces --selector team=payments billing-bot-7 --reason "INC-1234"`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := emptyServiceAccount(cmd, o.sa); err != nil {
				return err
			}
			if err := allAlone(o.all, args, o.sa); err != nil {
				return err
			}
			if (o.sa != "" || o.all) && len(args) == 0 {
				return nil // by service account alone, or every agent
			}
			return exactlyOneAgent(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			agentID := ""
			if len(args) == 1 {
				agentID = args[0]
			}
			sel, err := o.scope.parse(cmd)
			if err != nil {
				return err
			}
			if o.scope.on {
				return runClusterFreeze(cmd.Context(), cmd.OutOrStdout(), &o, agentID, sel)
			}
			return runFreeze(cmd.Context(), cmd.OutOrStdout(), &o, agentID)
		},
	}
	o.conn.addFlags(cmd)
	o.scope.addFlags(cmd, "freeze")
	f := cmd.Flags()
	f.StringVar(&o.sa, "service-account", "", "also (or, without AGENT_ID, only) freeze every sidecar running as this ServiceAccount, whatever its agent id")
	f.BoolVar(&o.all, "all", false, "freeze every agent of the namespace, whatever its id or ServiceAccount (allAgents: true; no AGENT_ID or --service-account)")
	f.StringVar(&o.reason, "reason", "", "why: returned to the agent as the deny reason and kept on the FrozenAgent")
	f.DurationVar(&o.dur, "for", 0, "end the freeze after this long (sets expiresAt)")
	f.StringVar(&o.until, "until", "", "end the freeze at this RFC 3339 time (sets expiresAt)")
	f.StringVar(&o.name, "name", "", "the FrozenAgent's name (default: freeze-<agent id, made a valid name>; "+allAgentsName+" with --all)")
	addWaitFlag(cmd, &o.wait)
	f.DurationVar(&o.timeout, "timeout", o.timeout, "how long --wait waits")
	return cmd
}

// emptyServiceAccount refuses --service-account "" (a script's unset
// variable) with what is wrong, rather than as a missing agent id.
func emptyServiceAccount(cmd *cobra.Command, sa string) error {
	if cmd.Flags().Changed("service-account") && sa == "" {
		return usage("--service-account needs a ServiceAccount name")
	}
	return nil
}

// allAlone refuses --all beside an agent id or --service-account, before
// anything reaches the cluster: a FrozenAgent with allAgents names neither
// (the CRD refuses it), and a command that stood for both would leave the
// user unsure which it did.
func allAlone(all bool, args []string, sa string) error {
	switch {
	case !all:
		return nil
	case len(args) > 0:
		return usage("--all stands for every agent of the namespace: give no AGENT_ID (%q) beside it", args[0])
	case sa != "":
		return usage("--all stands for every agent of the namespace: give no --service-account beside it")
	}
	return nil
}

func exactlyOneAgent(_ *cobra.Command, args []string) error {
	if len(args) != 1 {
		return usage("give exactly one agent id, not %d arguments", len(args))
	}
	return nil
}

// checkFreeze checks the FrozenAgent the command would create (or, for
// unfreeze, look for) with the CRD's own schema and CEL rules
// (internal/crdschema, as `toolgate validate` and the API server check
// it), before anything reaches the cluster, and names in each problem the
// argument or flag that set the field. Only spec is judged here: the
// object's name and namespace are checked where they are known (--name,
// and -n or the kubeconfig), so a stand-in takes their place.
func checkFreeze(agentID, sa, reason string, all bool) error {
	fa := &v1alpha1.FrozenAgent{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "FrozenAgent"},
		ObjectMeta: metav1.ObjectMeta{Name: "freeze", Namespace: metav1.NamespaceDefault},
		Spec:       v1alpha1.FrozenAgentSpec{AgentID: agentID, ServiceAccount: sa, AllAgents: all, Reason: reason},
	}
	problems, err := crdschema.Check(context.Background(), fa)
	if err != nil {
		return fmt.Errorf("checking the FrozenAgent: %w", err)
	}
	setBy := map[string]string{"spec": "AGENT_ID", "spec.agentId": "AGENT_ID", "spec.serviceAccount": "--service-account", "spec.reason": "--reason"}
	if all {
		setBy["spec"] = "--all"
	}
	value := map[string]string{"spec.agentId": agentID, "spec.serviceAccount": sa, "spec.reason": reason}
	var errs []error
	for _, e := range problems {
		flag, ok := setBy[e.Field]
		if !ok {
			// Not the flags' doing: the stand-in's metadata, or the note
			// that CEL rules were skipped after another problem.
			continue
		}
		msg := e.Detail
		switch {
		case e.Field == "spec.serviceAccount":
			msg = fmt.Sprintf("serviceAccount %q is not a ServiceAccount name: %s", sa, e.Detail)
		case e.Type == field.ErrorTypeTooLong:
			msg = fmt.Sprintf("%s is %d characters long: %s", strings.TrimPrefix(e.Field, "spec."), utf8.RuneCountInString(value[e.Field]), e.Detail)
		}
		errs = append(errs, fmt.Errorf("%s: %s", flag, msg))
	}
	if err := errors.Join(errs...); err != nil {
		return usage("%v", err)
	}
	return nil
}

func (o *freezeOptions) validate(agentID string) (*metav1.Time, error) {
	if err := checkFreeze(agentID, o.sa, o.reason, o.all); err != nil {
		return nil, err
	}
	var errs []error
	if o.dur < 0 {
		errs = append(errs, fmt.Errorf("--for must be positive, not %v", o.dur))
	}
	if o.dur != 0 && o.until != "" {
		errs = append(errs, errors.New("--for and --until both set an end: give one"))
	}
	if o.timeout <= 0 {
		errs = append(errs, fmt.Errorf("--timeout must be positive, not %v", o.timeout))
	}
	if o.name != "" {
		if msgs := validation.IsDNS1123Subdomain(o.name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--name %q: %s", o.name, msgs[0]))
		}
	}
	var expires *metav1.Time
	switch {
	case o.dur > 0:
		expires = &metav1.Time{Time: o.now().Add(o.dur).Truncate(time.Second)}
	case o.until != "":
		t, err := time.Parse(time.RFC3339, o.until)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("--until %q is not an RFC 3339 time like 2026-12-01T00:00:00Z", o.until))
		case !t.After(o.now()):
			errs = append(errs, fmt.Errorf("--until %s has passed: the freeze would never apply", o.until))
		default:
			expires = &metav1.Time{Time: t}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, usage("%v", err)
	}
	return expires, nil
}

func runFreeze(ctx context.Context, out io.Writer, o *freezeOptions, agentID string) error {
	expires, err := o.validate(agentID)
	if err != nil {
		return err
	}
	c, ns, err := o.conn.client()
	if err != nil {
		return err
	}
	name := freezeName(o, agentID)
	want := engine.FrozenAgent{ID: agentID, ServiceAccount: o.sa, All: o.all}
	what := agentID
	switch {
	case o.all:
		what = "every agent"
	case o.sa != "":
		what = want.Describe()
	}
	fa := &v1alpha1.FrozenAgent{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByCLIValue}},
		Spec: v1alpha1.FrozenAgentSpec{AgentID: agentID, ServiceAccount: o.sa, AllAgents: o.all, Reason: o.reason, ExpiresAt: expires},
	}
	start := time.Now()
	switch err := c.Create(ctx, fa); {
	case apierrors.IsAlreadyExists(err):
		var existing v1alpha1.FrozenAgent
		if err := c.Get(ctx, client.ObjectKeyFromObject(fa), &existing); err != nil {
			return notDone("FrozenAgent %s/%s exists but cannot be read: %v", ns, name, err)
		}
		if have := bundle.FrozenAgent(&existing); !sameTarget(have, want) {
			if have.ServiceAccount == "" && !have.All && o.sa == "" && !o.all {
				return usage("FrozenAgent %s/%s already freezes %q, not %q: choose another --name", ns, name, existing.Spec.AgentID, agentID)
			}
			return usage("FrozenAgent %s/%s already freezes %s, not %s: choose another --name", ns, name, have.Describe(), want.Describe())
		}
		note := ""
		if o.reason != "" || expires != nil {
			note = " (its reason and expiry are kept: unfreeze first, or give another --name)"
		}
		fmt.Fprintf(out, "frozenagent %s/%s already freezes %s%s\n", ns, name, what, note)
	case err != nil:
		return notDone("creating FrozenAgent %s/%s: %v", ns, name, err)
	default:
		fmt.Fprintf(out, "frozenagent %s/%s created\n", ns, name)
	}
	if o.wait == waitNone {
		return nil
	}
	done, err := waitLive(ctx, c, client.ObjectKeyFromObject(fa), o.timeout, o.wait)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s is frozen in %s: %s\n", what, ns, done.describe(o.wait, "live in bundle "+done.revision, time.Since(start)))
	return nil
}

// sameTarget tells whether two freezes stop the same agents, as evaluation
// matches them (the agent id case-insensitively).
func sameTarget(x, y engine.FrozenAgent) bool {
	return engine.SameAgent(x.ID, y.ID) && x.ServiceAccount == y.ServiceAccount && x.All == y.All
}

// waitLive watches the FrozenAgent until its Ready condition says it is
// published for its current generation and, waiting for sidecars, its
// Enforced condition says every live sidecar applies it; it returns the
// bundle revision. A watch, not polling: the answer arrives as soon as the
// operator writes its status (which it batches, see statusDelay in
// controllers/setup.go), so the time reported is the operator's, not a
// poll interval's.
func waitLive(ctx context.Context, c client.WithWatch, key client.ObjectKey, timeout time.Duration, mode waitMode) (confirmation, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := "no status yet: is the toolgate operator running and watching this namespace?"
	published := false
	timedOut := func() error {
		if published {
			return notDone("FrozenAgent %s is live but not confirmed applied by every sidecar after %v (%s)", key, timeout, last)
		}
		return notDone("FrozenAgent %s is not confirmed live after %v (%s)", key, timeout, last)
	}
	for {
		var list v1alpha1.FrozenAgentList
		// No resourceVersion: the watch starts with the object as it is.
		w, err := c.Watch(ctx, &list, client.InNamespace(key.Namespace),
			client.MatchingFields{"metadata.name": key.Name})
		if err != nil {
			if ctx.Err() != nil {
				return confirmation{}, timedOut()
			}
			return confirmation{}, notDone("watching FrozenAgent %s: %v", key, err)
		}
		got, done, err := watchLive(w.ResultChan(), key, mode, &last, &published)
		w.Stop()
		switch {
		case done:
			return got, err
		case ctx.Err() != nil:
			return confirmation{}, timedOut()
		}
		// The watch ended (the API server closes watches now and then):
		// start another.
	}
}

// watchLive reads events until the freeze is confirmed (as mode asks),
// gone or expired (done), or the watch ends (not done). last is updated
// with the latest reason, published once the operator reports it live.
func watchLive(events <-chan watch.Event, key client.ObjectKey, mode waitMode, last *string, published *bool) (confirmation, bool, error) {
	for ev := range events {
		switch ev.Type {
		case watch.Deleted:
			return confirmation{}, true, notDone("FrozenAgent %s was deleted while waiting", key)
		case watch.Error:
			return confirmation{}, false, nil
		}
		fa, ok := ev.Object.(*v1alpha1.FrozenAgent)
		if !ok {
			continue
		}
		ready := meta.FindStatusCondition(fa.Status.Conditions, v1alpha1.ConditionReady)
		switch {
		case ready == nil || ready.ObservedGeneration != fa.Generation:
		case ready.Status == metav1.ConditionTrue && fa.Status.BundleRevision != "":
			*published = true
			if mode == waitOperator {
				return confirmation{revision: fa.Status.BundleRevision}, true, nil
			}
			if got, ok := sidecarsApply(fa.Status.Conditions, fa.Generation, fa.Status.Enforcement, last); ok {
				got.revision = fa.Status.BundleRevision
				return got, true, nil
			}
		case ready.Reason == v1alpha1.ReasonExpired:
			return confirmation{}, true, notDone("FrozenAgent %s has already expired: %s", key, ready.Message)
		default:
			*last = ready.Reason + ": " + ready.Message
		}
	}
	return confirmation{}, false, nil
}
