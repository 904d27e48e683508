package main

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/manifest"
)

// goKubectl does, with the Go client, the few kubectl commands the demo runs,
// for machines without kubectl: create namespace, apply (-f or -k, optionally
// --dry-run=server), delete frozenagent, get policies,frozenagents.
type goKubectl struct{ c client.Client }

func (g goKubectl) run(args ...string) (string, error) {
	ctx := context.Background()
	var ns, path string
	var dryRun bool
	var rest []string
	for i := 0; i < len(args); i++ {
		switch a := args[i]; {
		case a == "-n" && i+1 < len(args):
			ns, i = args[i+1], i+1
		case (a == "-f" || a == "-k") && i+1 < len(args):
			path, i = args[i+1], i+1
		case a == "--dry-run=server":
			dryRun = true
		default:
			rest = append(rest, a)
		}
	}
	switch {
	case len(rest) == 3 && rest[0] == "create" && rest[1] == "namespace":
		if err := g.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rest[2]}}); err != nil {
			return "", err
		}
		return "namespace/" + rest[2] + " created", nil
	case len(rest) == 1 && rest[0] == "apply":
		return g.apply(ctx, ns, path, dryRun)
	case len(rest) == 3 && rest[0] == "delete" && rest[1] == "frozenagent":
		f := &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rest[2]}}
		if err := g.c.Delete(ctx, f); err != nil {
			return "", err
		}
		return "frozenagent.toolgate.dev/" + rest[2] + " deleted", nil
	case len(rest) == 2 && rest[0] == "get" && rest[1] == "policies,frozenagents":
		return g.get(ctx, ns)
	}
	return "", fmt.Errorf("the demo's kubectl stand-in does not know %q", strings.Join(args, " "))
}

func (g goKubectl) apply(ctx context.Context, ns, path string, dryRun bool) (string, error) {
	set, err := manifest.Load([]string{path}, nil)
	if err != nil {
		return "", err
	}
	var objs []client.Object
	for i := range set.Policies {
		objs = append(objs, &set.Policies[i].Object)
	}
	for i := range set.FrozenAgents {
		objs = append(objs, &set.FrozenAgents[i].Object)
	}
	var opts []client.CreateOption
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	var lines []string
	for _, obj := range objs {
		obj.SetNamespace(ns)
		kind := strings.ToLower(obj.GetObjectKind().GroupVersionKind().Kind)
		if kind == "" {
			kind = strings.ToLower(fmt.Sprintf("%T", obj)[len("*v1alpha1."):])
		}
		err := g.c.Create(ctx, obj, opts...)
		if apierrors.IsAlreadyExists(err) {
			continue
		}
		if err != nil {
			return strings.Join(lines, "\n"), err
		}
		lines = append(lines, fmt.Sprintf("%s.toolgate.dev/%s created", kind, obj.GetName()))
	}
	return strings.Join(lines, "\n"), nil
}

func (g goKubectl) get(ctx context.Context, ns string) (string, error) {
	var policies v1alpha1.PolicyList
	var frozen v1alpha1.FrozenAgentList
	if err := errors.Join(g.c.List(ctx, &policies, client.InNamespace(ns)), g.c.List(ctx, &frozen, client.InNamespace(ns))); err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-40s %-6s %-6s %-9s %s\n", "NAME", "READY", "RULES", "PRIORITY", "DEFAULT")
	for _, p := range policies.Items {
		fmt.Fprintf(&b, "%-40s %-6s %-6d %-9d %s\n", "policy.toolgate.dev/"+p.Name, ready(p.Status.Conditions),
			p.Status.RuleCount, p.Spec.Priority, p.Spec.DefaultEffect)
	}
	fmt.Fprintf(&b, "\n%-40s %-16s %-6s\n", "NAME", "AGENT", "READY")
	for _, f := range frozen.Items {
		fmt.Fprintf(&b, "%-40s %-16s %-6s\n", "frozenagent.toolgate.dev/"+f.Name, f.Spec.AgentID, ready(f.Status.Conditions))
	}
	return strings.TrimRight(b.String(), "\n"), nil
}

func ready(conds []metav1.Condition) string {
	if c := meta.FindStatusCondition(conds, "Ready"); c != nil {
		return string(c.Status)
	}
	return ""
}
