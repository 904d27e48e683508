package controllers_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/localcluster"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/webhook"
)

// chunkedPartBytes is the part size the test's operator runs with: small
// enough that the 10,000-rule bundle (about 280 KB gzipped) takes several
// parts, so every part of the format is exercised on the real API server.
const chunkedPartBytes = 64 << 10

// A namespace of 10,000 rules publishes, chunked across ConfigMaps, with
// every object Ready; a real sidecar process, with the injected sidecar's
// Role and the operator's key, verifies and loads it whole and decides a
// call by the 10,000th rule; shrinking the namespace back to one ConfigMap
// deletes the parts.
func TestTenThousandRulesPublishChunkedAndASidecarLoadsThem(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-chunks-")
	ring := signingKeys(t, newSigningKey(t))
	startManager(t, controllers.Options{Keys: controllers.NewSigningKeys(ring), MaxStoredBytes: chunkedPartBytes}, ns)
	const rules = 10_000
	policies := testenv.ManyRulePolicies(ns, rules)
	for i := range policies {
		create(t, &policies[i])
	}

	// Every Policy Ready, not BundleTooLarge; the ConfigMap holds an index.
	testenv.EventuallyWithin(t, 2*time.Minute, 200*time.Millisecond, "every Policy of the 10,000 rules Ready", func() (bool, string) {
		var list v1alpha1.PolicyList
		if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
			return false, err.Error()
		}
		for _, p := range list.Items {
			c := findCondition(p.Status.Conditions, v1alpha1.ConditionReady)
			if c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != p.Generation {
				return false, fmt.Sprintf("%s: %+v", p.Name, c)
			}
		}
		return len(list.Items) == len(policies), fmt.Sprintf("%d policies", len(list.Items))
	})
	cm, _ := getBundleConfigMap(t, ns)
	if !bundle.IsChunked(cm) {
		t.Fatalf("the bundle ConfigMap is not chunked: data keys %v, binaryData keys %v", keys(cm.Data), keys(cm.BinaryData))
	}
	ix, err := bundle.ParseIndex([]byte(cm.Data[bundle.IndexKey]), cm.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := ring.Trusted().VerifyIndex([]byte(cm.Data[bundle.IndexSignatureKey]), nil, []byte(cm.Data[bundle.IndexKey]), ns); err != nil {
		t.Fatalf("the index's signature: %v", err)
	}
	b := assembled(t, cm)
	if n := countRules(b); n != rules || b.Revision != ix.Revision || b.Revision != cm.Annotations[v1alpha1.RevisionAnnotation] {
		t.Fatalf("the parts reassemble to %d rules, revision %s; index %s, annotation %s", n, b.Revision, ix.Revision, cm.Annotations[v1alpha1.RevisionAnnotation])
	}
	t.Logf("%d rules: %d gzipped bytes in %d parts of at most %d", rules, ix.Size, len(ix.Parts), chunkedPartBytes)

	// A real sidecar, with exactly the injected sidecar's rights.
	const user = "chunks-sidecar"
	grantSidecarRole(t, ns, user)
	kubeconfig := testenv.WriteKubeconfig(t, testenv.KubeconfigAs(t, restCfg, user))
	dir := t.TempDir()
	bin, err := localcluster.BuildToolgate(dir)
	if err != nil {
		t.Fatal(err)
	}
	addr := testenv.FreeLoopbackAddr(t)
	sidecar := startProcess(t, filepath.Join(dir, "sidecar.log"), bin, "sidecar", "--configmap", ns+"/"+bundle.DefaultConfigMapName,
		"--kubeconfig", kubeconfig, "--listen", addr, "--decision-log", "none", "--trusted-keys-pem", string(ring.PublicPEM()))
	last := map[string]any{"tool_name": testenv.RuleTool(rules - 1), "agent_id": "agent-1"}
	unruled := map[string]any{"tool_name": "tool-none", "agent_id": "agent-1"}
	d := decidesEventually(t, addr, last, sidecar, func(d sidecarDecision) bool {
		return d.Decision == "deny" && d.MatchedRuleID == fmt.Sprintf("r%05d", rules-1) && d.BundleRevision == b.Revision
	})
	t.Logf("the 10,000th rule decides: %+v", d)
	if d := decide(t, addr, unruled); d.Decision != "allow" {
		t.Fatalf("a tool no rule names: %+v, want allow", d)
	}
	mem := memoryOf(t, sidecar.Process.Pid)
	t.Logf("sidecar serving %d rules: VmRSS %d KiB (VmHWM %d), of which anonymous %d KiB; the rest is the binary's pages, which the kernel reclaims under a memory limit",
		rules, mem["VmRSS"], mem["VmHWM"], mem["RssAnon"])
	if mem["RssAnon"] > 64<<10 {
		t.Errorf("the sidecar's anonymous memory serving %d rules is %d KiB, over the injected sidecar's 64 MiB limit", rules, mem["RssAnon"])
	}

	// Shrink to one Policy: the bundle fits one ConfigMap again, the
	// parts are deleted once the ConfigMap no longer names them, and the
	// sidecar follows.
	for i := range policies[1:] {
		if err := k8s.Delete(context.Background(), &policies[1+i]); err != nil {
			t.Fatal(err)
		}
	}
	testenv.EventuallyWithin(t, time.Minute, 200*time.Millisecond, "the bundle back in one ConfigMap and its parts deleted", func() (bool, string) {
		cm, _ := getBundleConfigMap(t, ns)
		if cm == nil || bundle.IsChunked(cm) {
			return false, "still chunked"
		}
		for _, name := range bundle.PartNames(bundle.DefaultConfigMapName) {
			err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &corev1.ConfigMap{})
			if !apierrors.IsNotFound(err) {
				return false, fmt.Sprintf("part %s: %v", name, err)
			}
		}
		return true, ""
	})
	decidesEventually(t, addr, last, sidecar, func(d sidecarDecision) bool { return d.Decision == "allow" })
	if d := decide(t, addr, map[string]any{"tool_name": testenv.RuleTool(0), "agent_id": "agent-1"}); d.Decision != "deny" || d.MatchedRuleID != "r00000" {
		t.Fatalf("the first rule, still published: %+v", d)
	}
}

// Past bundle.MaxParts parts the namespace is BundleTooLarge, as before
// chunking, and its message says how many parts it would need.
func TestPastMaxPartsIsBundleTooLarge(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-chunks-")
	// 10,000 rules gzip to about 280 KB: parts of 16 KiB cannot hold them.
	startManager(t, controllers.Options{MaxStoredBytes: 16 << 10}, ns)
	policies := testenv.ManyRulePolicies(ns, 10_000)
	for i := range policies {
		create(t, &policies[i])
	}
	testenv.EventuallyWithin(t, 2*time.Minute, 200*time.Millisecond, "BundleTooLarge naming the parts", func() (bool, string) {
		var p v1alpha1.Policy
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(&policies[0]), &p); err != nil {
			return false, err.Error()
		}
		c := findCondition(p.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == v1alpha1.ReasonBundleTooLarge &&
			strings.Contains(c.Message, fmt.Sprintf("more than %d ConfigMaps", bundle.MaxParts)), fmt.Sprintf("%+v", c)
	})
	// What stays published is whole: no ConfigMap (the first reconcile saw
	// every Policy), or an earlier, smaller bundle whose parts all match.
	if cm, ok := getBundleConfigMap(t, ns); ok {
		if b := assembled(t, cm); countRules(b) >= 10_000 || b.Revision != cm.Annotations[v1alpha1.RevisionAnnotation] {
			t.Fatalf("the bundle left published has %d rules, revision %s, annotation %s", countRules(b), b.Revision, cm.Annotations[v1alpha1.RevisionAnnotation])
		}
	}
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// assembled reads a chunked bundle ConfigMap's parts with the test's
// client, as a sidecar would, and decodes the document.
func assembled(t *testing.T, cm *corev1.ConfigMap) engine.Bundle {
	t.Helper()
	gz, _, err := bundle.ReadChunked(cm, nil, cm.Namespace, func(name string) ([]byte, error) {
		var part corev1.ConfigMap
		if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: cm.Namespace, Name: name}, &part); err != nil {
			return nil, err
		}
		return part.BinaryData[bundle.PartKey], nil
	})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := bundle.ReadDocument(gz, true)
	if err != nil {
		t.Fatal(err)
	}
	b, err := engine.Decode(doc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// grantSidecarRole gives user in ns the injected sidecar's Role
// (webhook.SidecarRoleRules) and nothing else.
func grantSidecarRole(t *testing.T, ns, user string) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "toolgate-sidecar"},
		Rules: webhook.SidecarRoleRules(bundle.DefaultConfigMapName)}
	create(t, role)
	create(t, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "toolgate-sidecar"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}})
	for _, name := range []string{bundle.DefaultConfigMapName, bundle.PartName(bundle.DefaultConfigMapName, 1), bundle.PartName(bundle.DefaultConfigMapName, bundle.MaxParts)} {
		if !testenv.CanEventually(t, k8s, user, nil, "get", "", "configmaps", ns, name) {
			t.Fatalf("RBAC: the sidecar's Role does not let %s get ConfigMap %s", user, name)
		}
	}
}

// startProcess runs bin with args, its output in logFile, until the test
// ends.
func startProcess(t *testing.T, logFile, bin string, args ...string) *exec.Cmd {
	t.Helper()
	out, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = out.Close()
	})
	return cmd
}

type sidecarDecision struct {
	Decision       string `json:"decision"`
	Code           string `json:"code"`
	MatchedRuleID  string `json:"matchedRuleId"`
	BundleRevision string `json:"bundleRevision"`
}

func evaluateOnce(addr string, req map[string]any) (sidecarDecision, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return sidecarDecision{}, err
	}
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Post("http://"+addr+"/v1/evaluate", "application/json", bytes.NewReader(body))
	if err != nil {
		return sidecarDecision{}, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return sidecarDecision{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return sidecarDecision{}, fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	var d sidecarDecision
	return d, json.Unmarshal(b, &d)
}

func decide(t *testing.T, addr string, req map[string]any) sidecarDecision {
	t.Helper()
	d, err := evaluateOnce(addr, req)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func decidesEventually(t *testing.T, addr string, req map[string]any, sidecar *exec.Cmd, want func(sidecarDecision) bool) sidecarDecision {
	t.Helper()
	var last sidecarDecision
	var err error
	testenv.EventuallyWithin(t, time.Minute, 100*time.Millisecond, fmt.Sprintf("the sidecar (pid %d) deciding %v", sidecar.Process.Pid, req), func() (bool, string) {
		last, err = evaluateOnce(addr, req)
		return err == nil && want(last), fmt.Sprintf("last %+v, %v", last, err)
	})
	return last
}

// memoryOf is a process's memory figures from /proc/PID/status (VmRSS,
// VmHWM, RssAnon, RssFile), in KiB.
func memoryOf(t *testing.T, pid int) map[string]int64 {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(status), "\n") {
		name, rest, ok := strings.Cut(line, ":")
		var v int64
		if _, err := fmt.Sscanf(rest, "%d kB", &v); ok && err == nil {
			out[name] = v
		}
	}
	return out
}
