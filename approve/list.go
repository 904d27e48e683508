package approve

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/internal/kubeconn"
)

type listOptions struct {
	conn          kubeconn.Flags
	allNamespaces bool
	watch         bool
	now           func() time.Time
}

// NewApprovalsCommand returns `toolgate approvals` with its list subcommand.
func NewApprovalsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "approvals",
		Short: "Show the ApprovalRequests that wait for a person (toolgate approve and deny decide them)",
		Args:  noArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newListCommand())
	return cmd
}

func newListCommand() *cobra.Command {
	o := listOptions{now: time.Now}
	cmd := &cobra.Command{
		Use:   "list [-w] [-n NAMESPACE | -A]",
		Short: "List ApprovalRequests: NAME AGENT TOOL DECISION AGE EXPIRES; -w keeps watching",
		Long: `List the ApprovalRequests of a namespace (-A: of every namespace), newest last, with what
each asks and where it stands: DECISION is Pending, Approved, Denied, Consumed (an approval used)
or Expired.
-w prints them, then a line for every change, until interrupted.`,
		Example: `  toolgate approvals list -n agents
  toolgate approvals list -A -w`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.allNamespaces && cmd.Flags().Changed("namespace") {
				return usage("-A lists every namespace: give no -n %s beside it", o.conn.Namespace)
			}
			return runList(cmd.Context(), cmd.OutOrStdout(), &o)
		},
	}
	o.conn.Add(cmd, "the namespace to list")
	f := cmd.Flags()
	f.BoolVarP(&o.allNamespaces, "all-namespaces", "A", false, "list every namespace's ApprovalRequests")
	f.BoolVarP(&o.watch, "watch", "w", false, "after the list, print each change until interrupted")
	return cmd
}

// noArgs refuses arguments as a usage error (cobra.NoArgs's would exit 1).
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return usage("unknown command %q for %q (see %s --help)", args[0], cmd.CommandPath(), cmd.CommandPath())
	}
	return nil
}

func runList(ctx context.Context, out io.Writer, o *listOptions) error {
	c, ns, err := o.conn.Client(v1alpha1.AddToScheme)
	if err != nil {
		return err
	}
	var in []client.ListOption
	where := "namespace " + ns
	if o.allNamespaces {
		where = "any namespace"
	} else {
		in = append(in, client.InNamespace(ns))
	}
	t := table{allNamespaces: o.allNamespaces, now: o.now}
	if o.watch {
		return watchList(ctx, c, in, out, &t)
	}
	var list v1alpha1.ApprovalRequestList
	if err := c.List(ctx, &list, in...); err != nil {
		return listError(where, err)
	}
	if len(list.Items) == 0 {
		fmt.Fprintf(out, "no ApprovalRequests in %s\n", where)
		return nil
	}
	slices.SortStableFunc(list.Items, func(a, b v1alpha1.ApprovalRequest) int {
		return a.CreationTimestamp.Compare(b.CreationTimestamp.Time)
	})
	t.widen(list.Items)
	t.header(out)
	for i := range list.Items {
		t.row(out, &list.Items[i], "")
	}
	return nil
}

func listError(where string, err error) error {
	if apierrors.IsForbidden(err) {
		return notDone("listing ApprovalRequests in %s: refused by the API server: %s", where, apiMessage(err))
	}
	return notDone("listing ApprovalRequests in %s: %v", where, err)
}

// watchList prints the requests there are (the watch's first events), then
// one line per change, until ctx ends. A watch the API server closes is
// resumed from the last version seen; one too old to resume is started
// afresh, which prints the current requests again.
func watchList(ctx context.Context, c client.WithWatch, in []client.ListOption, out io.Writer, t *table) error {
	t.header(out)
	rv := ""
	for ctx.Err() == nil {
		opts := append([]client.ListOption{}, in...)
		if rv != "" {
			opts = append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
		}
		w, err := c.Watch(ctx, &v1alpha1.ApprovalRequestList{}, opts...)
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			return listError("the watch", err)
		}
		rv = watchEvents(w.ResultChan(), out, t, rv)
		w.Stop()
	}
	return nil
}

// watchEvents prints events until the channel closes and returns the
// version to resume from ("" after an error event: start afresh).
func watchEvents(events <-chan watch.Event, out io.Writer, t *table, rv string) string {
	for ev := range events {
		if ev.Type == watch.Error {
			return ""
		}
		ar, ok := ev.Object.(*v1alpha1.ApprovalRequest)
		if !ok {
			continue
		}
		rv = ar.ResourceVersion
		note := ""
		if ev.Type == watch.Deleted {
			note = "deleted"
		}
		t.row(out, ar, note)
	}
	return rv
}

// table prints rows in columns wide enough for the longest value seen
// first (list), or a default (watch: rows come one at a time).
type table struct {
	allNamespaces bool
	now           func() time.Time
	widths        [5]int // NAMESPACE NAME AGENT TOOL DECISION
}

var defaultWidths = [5]int{16, 24, 16, 16, 16}

func (t *table) widen(items []v1alpha1.ApprovalRequest) {
	for j, h := range headers[:5] {
		t.widths[j] = len(h) + 3
	}
	for i := range items {
		cells := t.cells(&items[i])
		for j := range t.widths {
			t.widths[j] = max(t.widths[j], len(cells[j])+3)
		}
	}
}

func (t *table) width(i int) int {
	if t.widths[i] == 0 {
		return defaultWidths[i]
	}
	return t.widths[i]
}

var headers = [7]string{"NAMESPACE", "NAME", "AGENT", "TOOL", "DECISION", "AGE", "EXPIRES"}

func (t *table) header(out io.Writer) { t.print(out, headers) }

func (t *table) row(out io.Writer, ar *v1alpha1.ApprovalRequest, note string) {
	cells := t.cells(ar)
	if note != "" {
		cells[6] += " (" + note + ")"
	}
	t.print(out, cells)
}

func (t *table) print(out io.Writer, cells [7]string) {
	var b strings.Builder
	for i, v := range cells {
		switch {
		case i == 0 && !t.allNamespaces:
		case i >= 5:
			fmt.Fprintf(&b, "%-8s", v)
		default:
			fmt.Fprintf(&b, "%-*s", t.width(i), v)
		}
	}
	fmt.Fprintln(out, strings.TrimRight(b.String(), " "))
}

func (t *table) cells(ar *v1alpha1.ApprovalRequest) [7]string {
	now := t.now()
	agent := ar.Spec.AgentID
	if agent == "" {
		agent = "sa:" + ar.Spec.ServiceAccount
	}
	expires := ar.Spec.ExpiresAt.Time
	exp := "in " + duration.HumanDuration(expires.Sub(now))
	if !now.Before(expires) {
		exp = duration.HumanDuration(now.Sub(expires)) + " ago"
	}
	return [7]string{ar.Namespace, ar.Name, agent, ar.Spec.Tool, standing(ar, now),
		duration.HumanDuration(now.Sub(ar.CreationTimestamp.Time)), exp}
}

// standing is where a request stands for the person reading the list,
// as the sidecar reads it (approval.StateOf): Pending, Approved, Denied,
// Consumed (an approval used), or Expired.
func standing(ar *v1alpha1.ApprovalRequest, now time.Time) string {
	return approval.StateOf(ar, now).String()
}
