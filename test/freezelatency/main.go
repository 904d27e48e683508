// Command freezelatency measures freeze-to-deny: from creating a FrozenAgent
// through the API until a sidecar in --configmap mode denies that agent with
// AGENT_FROZEN. Everything is real: envtest's kube-apiserver and etcd, the
// toolgate binary as manager and as sidecar. Run: make measure-freeze.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/internal/localcluster"
)

func main() {
	n := flag.Int("n", 50, "freezes to measure")
	target := flag.Duration("target-p99", time.Second, "exit 1 when p99 is above this")
	stopManager := flag.Bool("stop-manager", false, "stop the manager once the bundle is served: freezes then reach the sidecar only through its FrozenAgent watch")
	flag.Parse()
	if err := run(*n, *target, *stopManager); err != nil {
		fmt.Fprintln(os.Stderr, "freezelatency:", err)
		os.Exit(1)
	}
}

func run(n int, target time.Duration, stopManager bool) error {
	dir, err := os.MkdirTemp("", "toolgate-freezelatency")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin, err := localcluster.BuildToolgate(dir)
	if err != nil {
		return err
	}
	cluster, err := localcluster.Start(dir)
	if err != nil {
		return err
	}
	defer cluster.Stop()
	c := cluster.Client
	ctx := context.Background()
	const ns = "agents"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return err
	}
	mgr, err := cluster.StartProcess("manager", bin, cluster.ManagerArgs()...)
	if err != nil {
		return err
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	if _, err := cluster.StartProcess("sidecar", bin, "sidecar", "--configmap", ns+"/toolgate-bundle",
		"--kubeconfig", cluster.Kubeconfig, "--listen", addr, "--decision-log", "none"); err != nil {
		return err
	}
	allowAll := &v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "allow-all"},
		Spec: v1alpha1.PolicySpec{Rules: []v1alpha1.Rule{{ID: "all", Effect: v1alpha1.RuleAllow}}}}
	if err := c.Create(ctx, allowAll); err != nil {
		return err
	}
	if _, err := waitFor(addr, "warm-up", "allow", 60*time.Second); err != nil {
		return err
	}
	how := "real manager"
	if stopManager {
		mgr.Stop()
		how = "manager stopped"
	}

	var lat []time.Duration
	for i := range n {
		agent := fmt.Sprintf("agent-%d", i)
		start := time.Now()
		f := &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "freeze-" + agent},
			Spec: v1alpha1.FrozenAgentSpec{AgentID: agent, Reason: "measured"}}
		if err := c.Create(ctx, f); err != nil {
			return err
		}
		if _, err := waitFor(addr, agent, "AGENT_FROZEN", 30*time.Second); err != nil {
			return err
		}
		lat = append(lat, time.Since(start)) // from just before the API write
		time.Sleep(50 * time.Millisecond)    // let the status writer settle between samples
	}
	slices.Sort(lat)
	q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(p*float64(len(lat))))] }
	fmt.Printf("freeze-to-deny over %d freezes (sidecar --configmap, %s, envtest):\n", n, how)
	fmt.Printf("  p50 %v  p90 %v  p99 %v  max %v\n", q(0.50).Round(time.Millisecond), q(0.90).Round(time.Millisecond),
		q(0.99).Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond))
	if q(0.99) > target {
		return fmt.Errorf("p99 %v is above the target %v", q(0.99), target)
	}
	return nil
}

// waitFor polls the sidecar every 2 ms until agent's call gets want (a
// decision or a code).
func waitFor(addr, agent, want string, timeout time.Duration) (time.Duration, error) {
	body, _ := json.Marshal(map[string]any{"tool_name": "Bash", "agent_id": agent})
	start := time.Now()
	for time.Since(start) < timeout {
		resp, err := http.Post("http://"+addr+"/v1/evaluate", "application/json", bytes.NewReader(body))
		if err == nil {
			var r struct{ Decision, Code string }
			_ = json.NewDecoder(resp.Body).Decode(&r)
			resp.Body.Close()
			if r.Code == want || (r.Code == "" && r.Decision == want) {
				return time.Since(start), nil
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	return 0, fmt.Errorf("%s never got %s within %v", agent, want, timeout)
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
