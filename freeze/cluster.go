package freeze

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
)

// clusterScope is --all-namespaces and --selector: the command works on
// ClusterFrozenAgents, the cluster's kill switch, instead of the
// namespace's FrozenAgents.
type clusterScope struct {
	on       bool
	selector string
}

func (s *clusterScope) addFlags(cmd *cobra.Command, verb string) {
	f := cmd.Flags()
	f.BoolVarP(&s.on, "all-namespaces", "A", false, verb+" in every namespace --selector chooses (a ClusterFrozenAgent), not in one")
	f.StringVarP(&s.selector, "selector", "l", "", "with --all-namespaces: the namespaces, by label, as kubectl's -l (team=payments,tier!=dev); default every namespace")
}

// parse checks the flags against each other and reads the selector as the
// API server's label selectors are read (metav1.ParseToLabelSelector);
// nil selects every namespace.
func (s *clusterScope) parse(cmd *cobra.Command) (*metav1.LabelSelector, error) {
	switch {
	case !s.on && cmd.Flags().Changed("selector"):
		return nil, usage("--selector chooses namespaces: give it with --all-namespaces")
	case s.on && cmd.Flags().Changed("namespace"):
		return nil, usage("--all-namespaces freezes across namespaces: give no --namespace (choose namespaces with --selector)")
	case s.selector == "":
		return nil, nil
	}
	sel, err := metav1.ParseToLabelSelector(s.selector)
	if err == nil {
		err = bundle.SelectorError(sel)
	}
	if err != nil {
		return nil, usage("--selector %q: %v", s.selector, err)
	}
	return sel, nil
}

// where says which namespaces a selector chooses.
func where(sel *metav1.LabelSelector) string {
	if s := selectorString(sel); s != "" {
		return "every namespace labelled " + s
	}
	return "every namespace"
}

// selectorString is sel in kubectl's -l syntax, "" for every namespace;
// two selectors that choose alike by their terms print alike.
func selectorString(sel *metav1.LabelSelector) string {
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil || s.Empty() {
		return metav1.FormatLabelSelector(sel)
	}
	return s.String()
}

// freezeName is the object name a freeze gets without --name, for a
// FrozenAgent and a ClusterFrozenAgent alike.
func freezeName(o *freezeOptions, agentID string) string {
	switch {
	case o.name != "":
		return o.name
	case o.all:
		return allAgentsName
	case agentID != "":
		return ObjectName(agentID)
	}
	return ObjectName("sa-" + o.sa)
}

func runClusterFreeze(ctx context.Context, out io.Writer, o *freezeOptions, agentID string, sel *metav1.LabelSelector) error {
	expires, err := o.validate(agentID)
	if err != nil {
		return err
	}
	c, _, err := o.conn.client()
	if err != nil {
		return err
	}
	name := freezeName(o, agentID)
	want := engine.FrozenAgent{ID: agentID, ServiceAccount: o.sa, All: o.all}
	cf := &v1alpha1.ClusterFrozenAgent{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1alpha1.ManagedByLabel: v1alpha1.ManagedByCLIValue}},
		Spec: v1alpha1.ClusterFrozenAgentSpec{NamespaceSelector: sel,
			FrozenAgentSpec: v1alpha1.FrozenAgentSpec{AgentID: agentID, ServiceAccount: o.sa, AllAgents: o.all, Reason: o.reason, ExpiresAt: expires}},
	}
	what := describeTarget(want)
	start := time.Now()
	switch err := c.Create(ctx, cf); {
	case apierrors.IsAlreadyExists(err):
		var existing v1alpha1.ClusterFrozenAgent
		if err := c.Get(ctx, client.ObjectKeyFromObject(cf), &existing); err != nil {
			return notDone("ClusterFrozenAgent %s exists but cannot be read: %v", name, err)
		}
		have := clusterTarget(&existing)
		if !sameTarget(have, want) || selectorString(existing.Spec.NamespaceSelector) != selectorString(sel) {
			return usage("ClusterFrozenAgent %s already freezes %s in %s, not %s in %s: choose another --name", name,
				describeTarget(have), where(existing.Spec.NamespaceSelector), what, where(sel))
		}
		note := ""
		if o.reason != "" || expires != nil {
			note = " (its reason and expiry are kept: unfreeze first, or give another --name)"
		}
		fmt.Fprintf(out, "clusterfrozenagent %s already freezes %s in %s%s\n", name, what, where(sel), note)
	case err != nil:
		return notDone("creating ClusterFrozenAgent %s: %v", name, err)
	default:
		fmt.Fprintf(out, "clusterfrozenagent %s created: %s in %s\n", name, what, where(sel))
	}
	if o.wait == waitNone {
		return nil
	}
	n, done, err := waitClusterLive(ctx, c, name, o.timeout, o.wait)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s is frozen in %s: %s\n", what, where(sel),
		done.describe(o.wait, fmt.Sprintf("published to %d namespaces", n), time.Since(start)))
	return nil
}

func clusterTarget(cf *v1alpha1.ClusterFrozenAgent) engine.FrozenAgent {
	return bundle.FrozenAgent(&v1alpha1.FrozenAgent{Spec: cf.Spec.FrozenAgentSpec})
}

func describeTarget(f engine.FrozenAgent) string {
	if f.ServiceAccount == "" && !f.All {
		return f.ID
	}
	return f.Describe()
}

// waitClusterLive watches the ClusterFrozenAgent until the operator's
// Ready condition says it is published, for its current generation, to
// every namespace it selects, and returns how many; waiting for sidecars,
// until its Enforced condition says every live sidecar of those
// namespaces applies it. Sidecars watching ClusterFrozenAgents apply it
// before the bundles carry it, operator or not; the operator is what
// reads their Leases to confirm it.
func waitClusterLive(ctx context.Context, c client.WithWatch, name string, timeout time.Duration, mode waitMode) (int32, confirmation, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := "no status yet: is the toolgate operator running? Sidecars watching ClusterFrozenAgents apply it without it"
	published := false
	timedOut := func() error {
		if published {
			return notDone("ClusterFrozenAgent %s is live but not confirmed applied by every sidecar after %v (%s)", name, timeout, last)
		}
		return notDone("ClusterFrozenAgent %s is not confirmed live after %v (%s)", name, timeout, last)
	}
	for {
		var list v1alpha1.ClusterFrozenAgentList
		w, err := c.Watch(ctx, &list, client.MatchingFields{"metadata.name": name})
		if err != nil {
			if ctx.Err() != nil {
				return 0, confirmation{}, timedOut()
			}
			return 0, confirmation{}, notDone("watching ClusterFrozenAgent %s: %v", name, err)
		}
		n, got, done, err := watchClusterLive(w.ResultChan(), name, mode, &last, &published)
		w.Stop()
		switch {
		case done:
			return n, got, err
		case ctx.Err() != nil:
			return 0, confirmation{}, timedOut()
		}
	}
}

func watchClusterLive(events <-chan watch.Event, name string, mode waitMode, last *string, published *bool) (int32, confirmation, bool, error) {
	for ev := range events {
		switch ev.Type {
		case watch.Deleted:
			return 0, confirmation{}, true, notDone("ClusterFrozenAgent %s was deleted while waiting", name)
		case watch.Error:
			return 0, confirmation{}, false, nil
		}
		cf, ok := ev.Object.(*v1alpha1.ClusterFrozenAgent)
		if !ok {
			continue
		}
		ready := meta.FindStatusCondition(cf.Status.Conditions, v1alpha1.ConditionReady)
		switch {
		case ready == nil || ready.ObservedGeneration != cf.Generation:
		case ready.Status == metav1.ConditionTrue:
			*published = true
			if mode == waitOperator {
				return cf.Status.Namespaces, confirmation{}, true, nil
			}
			if got, ok := sidecarsApply(cf.Status.Conditions, cf.Generation, cf.Status.Enforcement, last); ok {
				return cf.Status.Namespaces, got, true, nil
			}
		case ready.Reason == v1alpha1.ReasonExpired:
			return 0, confirmation{}, true, notDone("ClusterFrozenAgent %s has already expired: %s", name, ready.Message)
		default:
			*last = ready.Reason + ": " + ready.Message
		}
	}
	return 0, confirmation{}, false, nil
}

// runClusterUnfreeze deletes the ClusterFrozenAgents that freeze what
// unfreezing(agentID, sa, all) matches; with a selector, only those whose
// namespaceSelector is that one.
func runClusterUnfreeze(ctx context.Context, out io.Writer, conn *connection, agentID, sa string, all bool, sel *metav1.LabelSelector, bySelector bool) error {
	if err := checkFreeze(agentID, sa, "", all); err != nil {
		return err
	}
	freezes, what := unfreezing(agentID, sa, all)
	c, _, err := conn.client()
	if err != nil {
		return err
	}
	var list v1alpha1.ClusterFrozenAgentList
	if err := c.List(ctx, &list); err != nil {
		return notDone("listing ClusterFrozenAgents: %v", err)
	}
	deleted := 0
	var stillAll []string
	for i := range list.Items {
		cf := &list.Items[i]
		f := clusterTarget(cf)
		if bySelector && selectorString(cf.Spec.NamespaceSelector) != selectorString(sel) {
			continue
		}
		if !freezes(f) {
			if f.All && !f.Expired(time.Now()) {
				stillAll = append(stillAll, cf.Name)
			}
			continue
		}
		if err := c.Delete(ctx, cf); err != nil && !apierrors.IsNotFound(err) {
			return notDone("deleting ClusterFrozenAgent %s: %v", cf.Name, err)
		}
		fmt.Fprintf(out, "clusterfrozenagent %s deleted (it froze %s in %s)\n", cf.Name, f.Describe(), where(cf.Spec.NamespaceSelector))
		deleted++
	}
	for _, name := range stillAll {
		fmt.Fprintf(out, "still frozen: ClusterFrozenAgent %s freezes every agent of the namespaces it selects (toolgate unfreeze --all-namespaces --all lifts it)\n", name)
	}
	if deleted == 0 {
		if bySelector {
			return notDone("no ClusterFrozenAgent with selector %q freezes %s", selectorString(sel), what)
		}
		return notDone("no ClusterFrozenAgent freezes %s", what)
	}
	return nil
}

// clusterFreezesLeft are the ClusterFrozenAgents that freeze what a
// namespaced unfreeze lifted (freezes) and select namespace ns, judged
// against its labels as the operator does (bundle.Selects). Said, not
// deleted: lifting a cluster freeze is --all-namespaces'. The user may
// not be allowed to read them or the Namespace: then nothing, or every
// matching one, is named.
func clusterFreezesLeft(ctx context.Context, c client.Client, ns string, freezes func(engine.FrozenAgent) bool) []*v1alpha1.ClusterFrozenAgent {
	var list v1alpha1.ClusterFrozenAgentList
	if err := c.List(ctx, &list); err != nil {
		return nil
	}
	var labels map[string]string
	known := false
	var namespace corev1.Namespace
	if err := c.Get(ctx, client.ObjectKey{Name: ns}, &namespace); err == nil {
		labels, known = namespace.Labels, true
	}
	var out []*v1alpha1.ClusterFrozenAgent
	for i := range list.Items {
		cf := &list.Items[i]
		f := clusterTarget(cf)
		if freezes(f) && !f.Expired(time.Now()) && (!known || bundle.Selects(cf.Spec.NamespaceSelector, labels)) {
			out = append(out, cf)
		}
	}
	return out
}
