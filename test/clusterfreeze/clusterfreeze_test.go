//go:build clusterfreeze

package clusterfreeze

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/localcluster"
	"github.com/toolgate/toolgate/internal/testenv"
)

const (
	namespaces = 100
	target     = time.Second // the p99
)

// sidecar is one running `toolgate sidecar --configmap` process.
type sidecar struct {
	namespace string
	selected  bool // its namespace is labelled team=payments
	socket    string
	client    *http.Client
	cmd       *exec.Cmd
	log       string
}

// TestClusterFreezeReaches100Namespaces: 100 namespaces, half labelled
// team=payments, each with a signed bundle ConfigMap written here the way
// the operator publishes it (bundle.BuildSources with the namespace's
// labels, sealed by a keyring the sidecars trust) and one real sidecar
// process watching it. No operator runs at any point. One
// ClusterFrozenAgent selecting team=payments must deny agent "bot" with
// AGENT_FROZEN in every payments namespace within target (p99, from just
// before the API write to the first frozen answer), and leave the other
// namespaces alone; then one selecting every namespace must reach all 100.
func TestClusterFreezeReaches100Namespaces(t *testing.T) {
	dir := t.TempDir()
	bin, err := localcluster.BuildToolgate(dir)
	if err != nil {
		t.Fatal(err)
	}
	assets, err := testenv.BinaryAssetsDir()
	if err != nil {
		t.Fatal(err)
	}
	crlog.SetLogger(logr.Discard())
	// kube-apiserver drains open watches for up to a minute on SIGTERM;
	// the sidecars are gone by then, and envtest kills it after this.
	env := &envtest.Environment{BinaryAssetsDirectory: assets, CRDDirectoryPaths: []string{testenv.CRDDir()},
		ErrorIfCRDPathMissing: true, ControlPlaneStopTimeout: 3 * time.Second}
	cfg, err := env.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: testenv.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := testenv.WriteKubeconfig(t, testenv.Kubeconfig(t, cfg))
	keys := testenv.Keyring(t, 1)
	trusted := filepath.Join(dir, "keys.pem")
	if err := os.WriteFile(trusted, keys.PublicPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	// Unix sockets: no port races among 100 processes; a short directory
	// keeps their paths under the 107-byte limit.
	sockDir, err := os.MkdirTemp("", "tgcf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(sockDir) })

	ctx := context.Background()
	sidecars := make([]*sidecar, namespaces)
	for i := range sidecars {
		s := &sidecar{namespace: fmt.Sprintf("agents-%03d", i), selected: i%2 == 0,
			socket: filepath.Join(sockDir, fmt.Sprintf("%03d.sock", i)), log: filepath.Join(dir, fmt.Sprintf("sidecar-%03d.log", i))}
		team := "search"
		if s.selected {
			team = "payments"
		}
		labels := map[string]string{"team": team, corev1.LabelMetadataName: s.namespace}
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.namespace, Labels: labels}}); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, bundleConfigMap(t, keys, s.namespace, labels)); err != nil {
			t.Fatal(err)
		}
		s.client = unixClient(s.socket)
		sidecars[i] = s
	}
	for _, s := range sidecars {
		s.start(t, bin, kubeconfig, trusted)
	}
	t.Cleanup(func() {
		for _, s := range sidecars {
			s.stop()
		}
	})
	started := time.Now()
	for _, s := range sidecars {
		s.waitWatching(t, 2*time.Minute-time.Since(started))
	}
	t.Logf("%d sidecars serving and watching ClusterFrozenAgents after %v", namespaces, time.Since(started).Round(time.Millisecond))
	for _, s := range sidecars {
		if d := s.decide(t, "bot"); d != "allow" {
			t.Fatalf("%s answers %s for bot before any freeze", s.namespace, d)
		}
	}

	var payments []*sidecar
	for _, s := range sidecars {
		if s.selected {
			payments = append(payments, s)
		}
	}
	lat := freezeAndTime(t, c, payments, "payments", "bot", &metav1.LabelSelector{MatchLabels: map[string]string{"team": "payments"}})
	report(t, "selector team=payments", lat)
	// Watch events reach each sidecar in order: once a later freeze of
	// every namespace is applied everywhere, the first one has been judged
	// everywhere too, and the unselected namespaces must still allow bot.
	latAll := freezeAndTime(t, c, sidecars, "everyone", "canary", nil)
	report(t, "every namespace", latAll)
	for _, s := range sidecars {
		d := s.decide(t, "bot")
		switch {
		case s.selected && d != string(engine.CodeAgentFrozen):
			t.Errorf("%s (team=payments) answers %s for bot", s.namespace, d)
		case !s.selected && d != "allow":
			t.Errorf("%s (team=search) answers %s for bot: frozen by a ClusterFrozenAgent that does not select it", s.namespace, d)
		}
	}
	for name, l := range map[string][]time.Duration{"team=payments": lat, "every namespace": latAll} {
		if p99 := quantile(l, 0.99); p99 > target {
			t.Errorf("%s: p99 %v above the target %v", name, p99, target)
		}
	}
}

// bundleConfigMap is the namespace's bundle as the operator publishes it:
// bundle.BuildSources with the namespace's labels (which the sidecars
// judge selectors against), one Policy allowing everything, sealed.
func bundleConfigMap(t *testing.T, keys *bundle.Keyring, ns string, labels map[string]string) *corev1.ConfigMap {
	t.Helper()
	allowAll := v1alpha1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "allow-all", Generation: 1},
		Spec: v1alpha1.PolicySpec{DefaultEffect: v1alpha1.EffectAllow, Rules: []v1alpha1.Rule{{ID: "all", Effect: v1alpha1.RuleAllow}}}}
	b, _ := bundle.BuildSources(bundle.Sources{Labels: labels, Policies: []v1alpha1.Policy{allowAll}}, time.Now())
	doc, rev, err := engine.Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: bundle.DefaultConfigMapName,
			Annotations: map[string]string{v1alpha1.RevisionAnnotation: rev}},
		Data: map[string]string{bundle.Key: string(doc), bundle.SignatureKey: string(keys.Seal(ns, rev, nil, time.Now()))},
	}
}

func unixClient(socket string) *http.Client {
	return &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		}, MaxIdleConnsPerHost: 2}}
}

func (s *sidecar) start(t *testing.T, bin, kubeconfig, trusted string) {
	t.Helper()
	logFile, err := os.Create(s.log)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	// The sidecar talks to the API server as its admin: RBAC is not what
	// is measured here (test/chart holds the sidecars' grant to that).
	s.cmd = exec.Command(bin, "sidecar", "--configmap", s.namespace+"/"+bundle.DefaultConfigMapName,
		"--kubeconfig", kubeconfig, "--trusted-keys", trusted, "--listen", "unix:"+s.socket, "--decision-log", "none")
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
}

func (s *sidecar) stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	_ = s.cmd.Wait()
}

func (s *sidecar) logTail() string {
	b, _ := os.ReadFile(s.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// waitWatching waits until /readyz says the bundle is served and the
// ClusterFrozenAgent watch is up.
func (s *sidecar) waitWatching(t *testing.T, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var body struct {
			Ready bool `json:"ready"`
			Watch struct {
				Watching bool `json:"watching"`
			} `json:"clusterFrozenAgentWatch"`
		}
		if resp, err := s.client.Get("http://sidecar/readyz"); err == nil {
			_ = json.NewDecoder(resp.Body).Decode(&body)
			resp.Body.Close()
		}
		if body.Ready && body.Watch.Watching {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not ready and watching after %v\n%s", s.namespace, timeout, s.logTail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// decide is the sidecar's answer for agent's call: its code when it has
// one (AGENT_FROZEN), else its decision.
func (s *sidecar) decide(t *testing.T, agent string) string {
	t.Helper()
	d, err := s.try(agent)
	if err != nil {
		t.Fatalf("%s: %v\n%s", s.namespace, err, s.logTail())
	}
	return d
}

func (s *sidecar) try(agent string) (string, error) {
	body, _ := json.Marshal(map[string]any{"tool_name": "Bash", "agent_id": agent})
	resp, err := s.client.Post("http://sidecar/v1/evaluate", "application/json", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var r struct{ Decision, Code string }
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		return "", err
	}
	if r.Code != "" {
		return r.Code, nil
	}
	return r.Decision, nil
}

// freezeAndTime creates a ClusterFrozenAgent freezing agent in the
// namespaces sel chooses, and times, per sidecar of want, the first
// AGENT_FROZEN answer. Four pollers sweep the sidecars not yet frozen
// (2 cores: more would take the CPU the sidecars need to apply the
// freeze), so a latency is at most one sweep late.
func freezeAndTime(t *testing.T, c client.Client, want []*sidecar, name, agent string, sel *metav1.LabelSelector) []time.Duration {
	t.Helper()
	cf := &v1alpha1.ClusterFrozenAgent{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1alpha1.ClusterFrozenAgentSpec{FrozenAgentSpec: v1alpha1.FrozenAgentSpec{AgentID: agent, Reason: "measured"},
			NamespaceSelector: sel}}
	const pollers, timeout = 4, 30 * time.Second
	lat := make([]time.Duration, len(want))
	start := time.Now()
	if err := c.Create(context.Background(), cf); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for p := range pollers {
		wg.Go(func() {
			var mine []int
			for i := p; i < len(want); i += pollers {
				mine = append(mine, i)
			}
			for len(mine) > 0 {
				if time.Since(start) > timeout {
					mu.Lock()
					for _, i := range mine {
						failures = append(failures, want[i].namespace)
					}
					mu.Unlock()
					return
				}
				left := mine[:0]
				for _, i := range mine {
					if d, err := want[i].try(agent); err == nil && d == string(engine.CodeAgentFrozen) {
						lat[i] = time.Since(start)
						continue
					}
					left = append(left, i)
				}
				mine = left
				time.Sleep(time.Millisecond)
			}
		})
	}
	wg.Wait()
	if len(failures) > 0 {
		slices.Sort(failures)
		t.Fatalf("ClusterFrozenAgent %s not applied within %v by %d sidecars: %v", name, timeout, len(failures), failures)
	}
	return lat
}

func quantile(lat []time.Duration, q float64) time.Duration {
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

// report prints the figures make measure-cluster-freeze shows.
func report(t *testing.T, what string, lat []time.Duration) {
	t.Helper()
	fmt.Printf("ClusterFrozenAgent create -> AGENT_FROZEN, %s, %d sidecars (manager stopped, envtest, real processes): p50 %v  p99 %v  max %v\n",
		what, len(lat), quantile(lat, 0.50).Round(time.Millisecond), quantile(lat, 0.99).Round(time.Millisecond),
		slices.Max(lat).Round(time.Millisecond))
}
