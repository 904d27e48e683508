// Package e2e runs toolgate end to end with real processes: envtest's
// kube-apiserver and etcd, the CRDs and webhook configurations installed, the
// toolgate binary as the manager, and three sidecars: one watching the bundle
// ConfigMap through the API, one reading a kubelet-style volume, and one
// watching through the API that loads only bundles the manager signed.
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/localcluster"
	"github.com/toolgate/toolgate/internal/testenv"
)

const ns = "agents"

func policy(name, description string) *v1alpha1.Policy {
	str := func(s string) *apiextensionsv1.JSON {
		b, _ := json.Marshal(s)
		return &apiextensionsv1.JSON{Raw: b}
	}
	return &v1alpha1.Policy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.PolicySpec{DefaultEffect: v1alpha1.EffectAllow, Rules: []v1alpha1.Rule{{
			ID: "no-rm-rf", Description: description, Effect: v1alpha1.RuleDeny,
			Conditions: []v1alpha1.Condition{
				{Field: "tool_name", Operator: "eq", Value: str("Bash")},
				{Field: "input.command", Operator: "matches", Value: str(`rm\s+-rf`)},
			},
		}}},
	}
}

func TestEndToEnd(t *testing.T) {
	dir := t.TempDir()
	bin, cluster := startCluster(t, dir)

	c := cluster.Client
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}

	mgr, err := cluster.StartProcess("manager", bin, cluster.ManagerArgs()...)
	if err != nil {
		t.Fatal(err)
	}
	apiAddr, volAddr := testenv.FreeLoopbackAddr(t), testenv.FreeLoopbackAddr(t)
	if _, err := cluster.StartProcess("sidecar-api", bin, "sidecar", "--configmap", ns+"/toolgate-bundle",
		"--kubeconfig", cluster.Kubeconfig, "--listen", apiAddr, "--decision-log", "none"); err != nil {
		t.Fatal(err)
	}
	volume := t.TempDir()
	kl := &kubelet{c: c, key: client.ObjectKey{Namespace: ns, Name: "toolgate-bundle"}, dir: volume}
	go kl.run(ctx)
	if _, err := cluster.StartProcess("sidecar-volume", bin, "sidecar", "--bundle-dir", volume,
		"--listen", volAddr, "--poll-interval", "500ms", "--decision-log", "none"); err != nil {
		t.Fatal(err)
	}
	// The signed sidecar trusts the keys the manager published, as an
	// injected one is given them.
	var keys corev1.ConfigMap
	testenv.Eventually(t, "the published signing keys", func() (bool, string) {
		err := c.Get(ctx, client.ObjectKey{Namespace: localcluster.SigningNamespace, Name: bundle.SigningKeysConfigMapName}, &keys)
		return err == nil, fmt.Sprint(err)
	})
	signedAddr := testenv.FreeLoopbackAddr(t)
	if _, err := cluster.StartProcess("sidecar-signed", bin, "sidecar", "--configmap", ns+"/toolgate-bundle",
		"--kubeconfig", cluster.Kubeconfig, "--listen", signedAddr, "--decision-log", "none",
		"--trusted-keys-pem", keys.Data[bundle.SigningKeysKey]); err != nil {
		t.Fatal(err)
	}
	sidecars := map[string]string{"--configmap": apiAddr, "--bundle-dir": volAddr, "--trusted-keys": signedAddr}
	ls := map[string]any{"tool_name": "Bash", "agent_id": "agent-7", "input": map[string]any{"command": "ls -la"}}
	rm := map[string]any{"tool_name": "Bash", "agent_id": "agent-7", "input": map[string]any{"command": "rm -rf /"}}
	other := map[string]any{"tool_name": "Bash", "agent_id": "agent-8", "input": map[string]any{"command": "ls"}}

	// The exec probes an injected sidecar container runs.
	probe := func(addr, which string) error {
		out, err := exec.Command(bin, "sidecar", "probe", which, "--listen="+addr, "--timeout=1s").CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}

	t.Run("no bundle yet: fail closed", func(t *testing.T) {
		for mode, addr := range sidecars {
			d := answersEventually(t, addr, ls, "NO_POLICIES", is("deny", "NO_POLICIES", ""))
			t.Logf("%s: %v", mode, d)
			if err := probe(addr, "alive"); err != nil {
				t.Errorf("%s: liveness probe: %v", mode, err)
			}
			if err := probe(addr, "ready"); err == nil || !strings.Contains(err.Error(), "no bundle is loaded") {
				t.Errorf("%s: readiness probe without a bundle: %v", mode, err)
			}
		}
	})

	t.Run("a bad regex is rejected at apply time by the manager's webhook", func(t *testing.T) {
		bad := policy("bad-regex", "")
		bad.Spec.Rules[0].Conditions[1].Value = &apiextensionsv1.JSON{Raw: []byte(`"rm(?=x)"`)}
		err := c.Create(ctx, bad)
		if err == nil || !strings.Contains(err.Error(), "spec.rules[0].conditions[1].value") || !strings.Contains(err.Error(), "does not compile") {
			t.Fatalf("create with a lookahead: %v\nmanager log:\n%s", err, mgr.LogTail(3000))
		}
	})

	t.Run("apply a Policy: decisions change", func(t *testing.T) {
		if err := c.Create(ctx, policy("guardrails", "rm -rf is not allowed")); err != nil {
			t.Fatal(err)
		}
		for mode, addr := range sidecars {
			answersEventually(t, addr, ls, "allow", is("allow", "", ""))
			d := answersEventually(t, addr, rm, "deny no-rm-rf", is("deny", "", "no-rm-rf"))
			if d.Reason != "rm -rf is not allowed" {
				t.Errorf("%s: reason %q", mode, d.Reason)
			}
			if err := probe(addr, "ready"); err != nil {
				t.Errorf("%s: readiness probe with a bundle: %v", mode, err)
			}
		}
	})

	t.Run("freeze, then unfreeze", func(t *testing.T) {
		freeze := &v1alpha1.FrozenAgent{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "freeze-agent-7"},
			Spec: v1alpha1.FrozenAgentSpec{AgentID: "Agent-7", Reason: "incident INC-42"}}
		if err := c.Create(ctx, freeze); err != nil {
			t.Fatal(err)
		}
		for mode, addr := range sidecars {
			d := answersEventually(t, addr, ls, "AGENT_FROZEN", is("deny", "AGENT_FROZEN", ""))
			if d.Reason != "incident INC-42" {
				t.Errorf("%s: reason %q", mode, d.Reason)
			}
			if d, err := evaluate(addr, other); err != nil || d.Decision != "allow" {
				t.Errorf("%s: another agent: %v %v", mode, d, err)
			}
		}
		if err := c.Delete(ctx, freeze); err != nil {
			t.Fatal(err)
		}
		for _, addr := range sidecars {
			answersEventually(t, addr, ls, "allow again", is("allow", "", ""))
		}
	})

	t.Run("toolgate freeze and unfreeze, the binary, against the running manager", func(t *testing.T) {
		out, err := exec.Command(bin, "freeze", "agent-8", "-n", ns, "--kubeconfig", cluster.Kubeconfig,
			"--reason", "INC-99 from the CLI").CombinedOutput()
		if err != nil || !strings.Contains(string(out), "agent-8 is frozen in "+ns+": the operator confirmed it live in bundle sha256:") {
			t.Fatalf("toolgate freeze: %v\n%s", err, out)
		}
		t.Logf("toolgate freeze said: %s", strings.TrimSpace(string(out)))
		for mode, addr := range sidecars {
			d := answersEventually(t, addr, other, "AGENT_FROZEN", is("deny", "AGENT_FROZEN", ""))
			if d.Reason != "INC-99 from the CLI" {
				t.Errorf("%s: reason %q", mode, d.Reason)
			}
		}
		if out, err := exec.Command(bin, "unfreeze", "agent-8", "-n", ns, "--kubeconfig", cluster.Kubeconfig).CombinedOutput(); err != nil {
			t.Fatalf("toolgate unfreeze: %v\n%s", err, out)
		}
		for _, addr := range sidecars {
			answersEventually(t, addr, other, "allow again", is("allow", "", ""))
		}
	})

	t.Run("a namespace editor's forged and rolled-back bundles are refused", func(t *testing.T) {
		key := client.ObjectKey{Namespace: ns, Name: "toolgate-bundle"}
		var older corev1.ConfigMap
		if err := c.Get(ctx, key, &older); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, policy("guardrails-extra", "")); err != nil {
			t.Fatal(err)
		}
		var newer corev1.ConfigMap
		testenv.Eventually(t, "the signed sidecar serving the newer bundle", func() (bool, string) {
			if err := c.Get(ctx, key, &newer); err != nil {
				return false, err.Error()
			}
			rev := newer.Annotations[v1alpha1.RevisionAnnotation]
			return rev != older.Annotations[v1alpha1.RevisionAnnotation] && servedRevision(signedAddr) == rev, servedRevision(signedAddr)
		})
		served := servedRevision(signedAddr)
		allowAll, _, err := engine.Encode(engine.Bundle{Policies: []engine.Policy{{ID: "allow-all", Version: 1, DefaultEffect: "allow"}}})
		if err != nil {
			t.Fatal(err)
		}
		write := func(data map[string]string) {
			t.Helper()
			testenv.Eventually(t, "writing the bundle ConfigMap", func() (bool, string) {
				var cm corev1.ConfigMap
				if err := c.Get(ctx, key, &cm); err != nil {
					return false, err.Error()
				}
				cm.Data, cm.BinaryData = data, nil
				err := c.Update(ctx, &cm) // the manager repairs it at once: retry a conflict
				return err == nil, fmt.Sprint(err)
			})
		}
		for _, attack := range []struct {
			reason string
			data   map[string]string
		}{
			{"rollback", older.Data}, // genuinely signed, older
			{"unsigned", map[string]string{"bundle.json": string(allowAll)}},
		} {
			write(attack.data)
			testenv.Eventually(t, "the "+attack.reason+" bundle refused", func() (bool, string) {
				m := metricsOf(signedAddr)
				return strings.Contains(m, `toolgate_sidecar_bundle_rejected_total{reason="`+attack.reason+`"}`), "not yet"
			})
			if d, err := evaluate(signedAddr, rm); err != nil || !is("deny", "", "no-rm-rf")(d) {
				t.Fatalf("after the %s attack: %v %v", attack.reason, d, err)
			}
		}
		// The manager repaired the ConfigMap; every sidecar serves its bundle.
		testenv.Eventually(t, "the repaired bundle served", func() (bool, string) {
			return servedRevision(signedAddr) == served && servedRevision(apiAddr) == served, servedRevision(apiAddr)
		})
	})

	t.Run("delete every Policy: NO_POLICIES", func(t *testing.T) {
		if err := c.DeleteAllOf(ctx, &v1alpha1.Policy{}, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, addr := range sidecars {
			answersEventually(t, addr, ls, "NO_POLICIES", is("deny", "NO_POLICIES", ""))
		}
	})

	t.Run("API server down: the last good bundle keeps serving", func(t *testing.T) {
		if err := c.Create(ctx, policy("guardrails-2", "")); err != nil {
			t.Fatal(err)
		}
		for _, addr := range sidecars {
			answersEventually(t, addr, rm, "deny", is("deny", "", "no-rm-rf"))
		}
		cancel() // stop playing kubelet before its API server goes
		// Stop sends SIGTERM, then SIGKILL after the stop timeout; either way
		// the API server is gone, which is what the rest checks.
		if err := cluster.Env.ControlPlane.APIServer.Stop(); err != nil {
			t.Logf("stopping the API server: %v", err)
		}
		if conn, err := net.DialTimeout("tcp", cluster.Config.Host[len("https://"):], time.Second); err == nil {
			conn.Close()
			t.Fatalf("the API server at %s still accepts connections", cluster.Config.Host)
		}
		for i := range 20 {
			for mode, addr := range sidecars {
				for _, tc := range []struct {
					req  map[string]any
					want func(decision) bool
				}{{ls, is("allow", "", "")}, {rm, is("deny", "", "no-rm-rf")}} {
					d, err := evaluate(addr, tc.req)
					if err != nil || !tc.want(d) {
						t.Fatalf("%s, %d00 ms after the API server stopped: %v %v", mode, i, d, err)
					}
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
	if t.Failed() {
		for _, name := range []string{"manager", "sidecar-api", "sidecar-volume", "sidecar-signed"} {
			if b, err := os.ReadFile(dir + "/" + name + ".log"); err == nil {
				t.Logf("%s log (tail):\n%s", name, tail(string(b), 2000))
			}
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// servedRevision is the revision a sidecar's /readyz reports, "" when none.
func servedRevision(addr string) string {
	resp, err := http.Get("http://" + addr + "/readyz")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	var r struct {
		BundleRevision string `json:"bundleRevision"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&r)
	return r.BundleRevision
}

func metricsOf(addr string) string {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}
