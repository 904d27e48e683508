package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/internal/testenv"
)

// managerUser is the identity the manager runs as: the audit log counts the
// write requests made under it, and only those.
const managerUser = "toolgate-scale-manager"

// auditPolicy logs the manager's write requests, once each (when the
// response is complete), with metadata only; nothing else is logged.
const auditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
- level: Metadata
  users: ["` + managerUser + `"]
  verbs: ["create", "update", "patch", "delete", "deletecollection"]
- level: None
`

// controlPlane is one envtest kube-apiserver and etcd with an audit log of
// the manager's writes, and a kubeconfig for the manager.
type controlPlane struct {
	env        *envtest.Environment
	admin      client.Client
	adminCfg   *rest.Config
	kubeconfig string // the manager's
	auditLog   string
}

func startControlPlane(dir string) (*controlPlane, error) {
	assets, err := testenv.BinaryAssetsDir()
	if err != nil {
		return nil, err
	}
	policyFile := filepath.Join(dir, "audit-policy.yaml")
	if err := os.WriteFile(policyFile, []byte(auditPolicy), 0o600); err != nil {
		return nil, err
	}
	cp := &controlPlane{auditLog: filepath.Join(dir, "audit.log")}
	cp.env = &envtest.Environment{
		BinaryAssetsDirectory:   assets,
		CRDDirectoryPaths:       []string{testenv.CRDDir()},
		ErrorIfCRDPathMissing:   true,
		Scheme:                  testenv.Scheme(),
		ControlPlaneStopTimeout: 10 * time.Second,
	}
	// The log backend's default mode is blocking: an event is written
	// before its request returns, so a count read after a change has
	// settled holds every write of that change.
	args := cp.env.ControlPlane.GetAPIServer().Configure()
	args.Set("audit-policy-file", policyFile)
	args.Set("audit-log-path", cp.auditLog)
	args.Set("audit-log-format", "json")
	args.Set("audit-log-maxsize", "100000") // MB: never rotated, the count reads one file
	if err := os.WriteFile(cp.auditLog, nil, 0o600); err != nil {
		return nil, err
	}
	cfg, err := cp.env.Start()
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd: %w", err)
	}
	cp.adminCfg = rest.CopyConfig(cfg)
	cp.adminCfg.QPS, cp.adminCfg.Burst = -1, 0 // the driver must not throttle itself
	if cp.admin, err = client.New(cp.adminCfg, client.Options{Scheme: testenv.Scheme()}); err != nil {
		cp.stop()
		return nil, err
	}
	// system:masters, as envtest's own admin: the manager's requests are
	// then exempt from API Priority and Fairness, like the admin's. In a
	// cluster its ServiceAccount shares a priority level with other
	// workloads; here nothing else competes for it.
	user, err := cp.env.AddUser(envtest.User{Name: managerUser, Groups: []string{"system:masters"}}, nil)
	if err != nil {
		cp.stop()
		return nil, err
	}
	kc, err := user.KubeConfig()
	if err != nil {
		cp.stop()
		return nil, err
	}
	cp.kubeconfig = filepath.Join(dir, "manager.kubeconfig")
	if err := os.WriteFile(cp.kubeconfig, kc, 0o600); err != nil {
		cp.stop()
		return nil, err
	}
	return cp, nil
}

func (cp *controlPlane) stop() { _ = cp.env.Stop() }

// namespaceName is the i-th namespace of a run.
func namespaceName(i int) string { return fmt.Sprintf("scale-%05d", i) }

// populate creates n namespaces, each with the objects of objectsFor, with
// workers requests in flight, and returns the objects as created.
func populate(ctx context.Context, c client.Client, n, perNamespace, workers int) ([]client.Object, error) {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	created := make([][]client.Object, n)
	for i := range n {
		g.Go(func() error {
			ns := namespaceName(i)
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				return err
			}
			created[i] = objectsFor(ns, perNamespace)
			for _, o := range created[i] {
				if err := c.Create(ctx, o); err != nil {
					return fmt.Errorf("creating %T %s/%s: %w", o, ns, o.GetName(), err)
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	var all []client.Object
	for _, objs := range created {
		all = append(all, objs...)
	}
	return all, nil
}

// objectsFor is one namespace's objects: Policies of a few rules (the
// first, p0, is the one the update phase changes), one FrozenAgent, one
// Agent and one PolicyException, all of which the operator publishes and
// gives a Ready condition. perNamespace below 4 drops from the end; above
// 6 adds Policies.
func objectsFor(ns string, perNamespace int) []client.Object {
	policies := max(1, perNamespace-3)
	var objs []client.Object
	for i := range policies {
		objs = append(objs, policy(ns, fmt.Sprintf("p%d", i), 4, "initial"))
	}
	objs = append(objs,
		&v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "freeze"},
			Spec: v1alpha1.FrozenAgentSpec{AgentID: "rogue-agent", Reason: "scale run"}},
		&v1alpha1.Agent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent"},
			Spec: v1alpha1.AgentSpec{ServiceAccountName: "agent", AgentID: "scale-agent"}},
		&v1alpha1.PolicyException{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "exception"},
			Spec: v1alpha1.PolicyExceptionSpec{PolicyRef: v1alpha1.PolicyReference{Kind: v1alpha1.PolicyKindPolicy, Name: "p0"},
				RuleIDs: []string{"r1"}, Agents: v1alpha1.ExceptionAgents{AgentIDs: []string{"migrator"}},
				ExpiresAt: metav1.NewTime(time.Now().Add(24 * time.Hour)), Justification: "scale run"}})
	return objs[:min(len(objs), max(perNamespace, 1))]
}

// policy has n deny rules; rule 0's tool is marker, so that a change is
// visible in the bundle.
func policy(ns, name string, n int, marker string) *v1alpha1.Policy {
	p := &v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for i := range n {
		tool := fmt.Sprintf("%s_tool_%d", name, i)
		if i == 0 {
			tool = marker
		}
		p.Spec.Rules = append(p.Spec.Rules, v1alpha1.Rule{ID: fmt.Sprintf("r%d", i), Effect: v1alpha1.RuleDeny,
			Description: "scale run",
			Conditions: []v1alpha1.Condition{
				{Field: "tool_name", Operator: "eq", Value: jsonString(tool)},
				{Field: "input.command", Operator: "contains", Value: jsonString(fmt.Sprintf("danger_%d", i))},
			}})
	}
	return p
}

func jsonString(s string) *apiextensionsv1.JSON {
	return &apiextensionsv1.JSON{Raw: []byte(`"` + s + `"`)}
}

// auditCounter reads the audit log as it grows and counts the manager's
// writes per namespace and per resource.
type auditCounter struct {
	mu     sync.Mutex
	f      *os.File
	r      *bufio.Reader
	byNS   map[string]int
	byKind map[string]map[string]int // namespace -> resource[/subresource] -> writes
	total  int
}

func newAuditCounter(path string) (*auditCounter, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &auditCounter{f: f, r: bufio.NewReaderSize(f, 1<<20), byNS: map[string]int{}, byKind: map[string]map[string]int{}}, nil
}

type auditEvent struct {
	User      struct{ Username string } `json:"user"`
	Verb      string                    `json:"verb"`
	ObjectRef *struct {
		Resource    string `json:"resource"`
		Namespace   string `json:"namespace"`
		Subresource string `json:"subresource"`
	} `json:"objectRef"`
}

// catchUp reads the lines written since the last call. A line being
// written (no newline yet) is left for the next call.
func (a *auditCounter) catchUp() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for {
		line, err := a.r.ReadString('\n')
		if err == io.EOF {
			if line != "" {
				// Partial line: step back so it is read whole next time.
				if _, serr := a.f.Seek(-int64(len(line)), io.SeekCurrent); serr != nil {
					return serr
				}
				a.r.Reset(a.f)
			}
			return nil
		}
		if err != nil {
			return err
		}
		var ev auditEvent
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			return fmt.Errorf("audit log line %.80q: %w", line, err)
		}
		if ev.User.Username != managerUser || ev.ObjectRef == nil {
			continue
		}
		a.total++
		ns := ev.ObjectRef.Namespace
		a.byNS[ns]++
		kind := ev.ObjectRef.Resource
		if ev.ObjectRef.Subresource != "" {
			kind += "/" + ev.ObjectRef.Subresource
		}
		if a.byKind[ns] == nil {
			a.byKind[ns] = map[string]int{}
		}
		a.byKind[ns][kind]++
	}
}

// snapshot is the manager's writes so far into the namespaces in, in all
// and per resource.
func (a *auditCounter) snapshot(in func(ns string) bool) (int, map[string]int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n, kinds := 0, map[string]int{}
	for ns, c := range a.byNS {
		if in(ns) {
			n += c
			for k, v := range a.byKind[ns] {
				kinds[k] += v
			}
		}
	}
	return n, kinds
}
