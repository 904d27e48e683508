package manager

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spf13/pflag"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/sidecar"
	"github.com/toolgate/toolgate/webhook"
)

// signingOptions run a manager that signs, with its keys in sns.
func signingOptions(t *testing.T, sns string, namespaces ...string) Options {
	t.Helper()
	o := testOptions(namespaces...)
	o.Kubeconfig = testenv.WriteKubeconfig(t, kubeconfig)
	o.Signing.Namespace = sns
	return o
}

func publishedKeys(t *testing.T, sns string) []byte {
	t.Helper()
	var cm corev1.ConfigMap
	testenv.Eventually(t, "the published signing keys", func() (bool, string) {
		err := k8s.Get(context.Background(), types.NamespacedName{Namespace: sns, Name: bundle.SigningKeysConfigMapName}, &cm)
		return err == nil, fmt.Sprint(err)
	})
	return []byte(cm.Data[bundle.SigningKeysKey])
}

func secretKeyring(t *testing.T, sns string) *bundle.Keyring {
	t.Helper()
	var s corev1.Secret
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: sns, Name: bundle.SigningKeySecretName}, &s); err != nil {
		t.Fatal(err)
	}
	r, err := bundle.ParseKeyring(s.Data[bundle.SigningKeySecretKey])
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// bundleSignature verifies ns's bundle ConfigMap against trusted.
func bundleSignature(t *testing.T, ns string, trusted *bundle.TrustedKeys) (bundle.Signature, error) {
	t.Helper()
	var cm corev1.ConfigMap
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: bundle.DefaultConfigMapName}, &cm); err != nil {
		return bundle.Signature{}, err
	}
	return trusted.Verify([]byte(cm.Data[bundle.SignatureKey]), ns, cm.Annotations[v1alpha1.RevisionAnnotation])
}

func TestSigningKeyCreatedOnFirstStart(t *testing.T) {
	sns, ns := testenv.Namespace(t, k8s, "mgr-"), testenv.Namespace(t, k8s, "mgr-")
	stop := runInBackground(t, signingOptions(t, sns, ns))
	pub := publishedKeys(t, sns)
	ring := secretKeyring(t, sns)
	if len(ring.Keys()) != 1 || string(pub) != string(ring.PublicPEM()) {
		t.Fatalf("the Secret holds %d keys and keys.pem is\n%s\nwant one key, published", len(ring.Keys()), pub)
	}
	trusted, err := bundle.ParseTrustedKeys(pub)
	if err != nil {
		t.Fatalf("keys.pem does not parse as --trusted-keys would: %v", err)
	}
	createPolicy(t, ns, "p")
	testenv.Eventually(t, "a bundle signed with the published key", func() (bool, string) {
		_, err := bundleSignature(t, ns, trusted)
		return err == nil, fmt.Sprint(err)
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// A restart, and replicas starting together, keep the one key.
	runInBackground(t, signingOptions(t, sns, ns))
	var wg sync.WaitGroup
	ids := make([]string, 4)
	for i := range ids {
		wg.Go(func() {
			r, err := EnsureSigningKeys(context.Background(), k8s, sns, bundle.SigningKeySecretName)
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = r.Current().ID()
		})
	}
	wg.Wait()
	for _, id := range ids {
		if id != ring.Current().ID() {
			t.Fatalf("key %s after a restart, was %s", id, ring.Current().ID())
		}
	}

	// Two replicas racing on a namespace without the Secret agree too.
	fresh := testenv.Namespace(t, k8s, "mgr-")
	for i := range ids {
		wg.Go(func() {
			r, err := EnsureSigningKeys(context.Background(), k8s, fresh, bundle.SigningKeySecretName)
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = r.Current().ID()
		})
	}
	wg.Wait()
	for _, id := range ids[1:] {
		if id != ids[0] {
			t.Fatalf("replicas created different keys: %v", ids)
		}
	}
}

func TestCorruptSigningKeySecretStopsTheManager(t *testing.T) {
	sns := testenv.Namespace(t, k8s, "mgr-")
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sns, Name: bundle.SigningKeySecretName},
		Data: map[string][]byte{bundle.SigningKeySecretKey: []byte("not a key")}}
	if err := k8s.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	_, err := New(restCfg, signingOptions(t, sns))
	if err == nil || !strings.Contains(err.Error(), bundle.SigningKeySecretName) || !strings.Contains(err.Error(), "not PEM") {
		t.Fatalf("New with a corrupt key Secret: %v, want an error naming it", err)
	}
}

// runSidecar runs the real sidecar loop with o, against envtest, and
// returns its base URL.
func runSidecar(t *testing.T, o sidecar.Options) string {
	t.Helper()
	o.Kubeconfig = testenv.WriteKubeconfig(t, kubeconfig)
	o.Listen, o.MetricsListen, o.DecisionLog = []string{"127.0.0.1:0"}, "", sidecar.DecisionLogNone
	ctx, cancel := context.WithCancel(context.Background())
	addrs, done := make(chan net.Addr, 1), make(chan error, 1)
	go func() { done <- sidecar.Run(ctx, o, func(a net.Addr) { addrs <- a }) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sidecar: %v", err)
		}
	})
	select {
	case a := <-addrs:
		return "http://" + a.String()
	case err := <-done:
		t.Fatalf("sidecar stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("sidecar did not listen")
	}
	return ""
}

type readyz struct {
	Ready          bool   `json:"ready"`
	BundleRevision string `json:"bundleRevision"`
	LastRejected   *struct {
		Reason string `json:"reason"`
	} `json:"lastRejected"`
}

func sidecarReadyz(t *testing.T, base string) readyz {
	t.Helper()
	_, body, err := get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var r readyz
	if err := json.Unmarshal([]byte(body), &r); err != nil {
		t.Fatalf("/readyz %q: %v", body, err)
	}
	return r
}

func bundleRevision(t *testing.T, ns string) string {
	t.Helper()
	var cm corev1.ConfigMap
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: bundle.DefaultConfigMapName}, &cm); err != nil {
		return ""
	}
	return cm.Annotations[v1alpha1.RevisionAnnotation]
}

// rejectedTotal lists the bundle_rejected_total series above 0, "" when
// the sidecar refused no bundle.
func rejectedTotal(t *testing.T, base string) string {
	t.Helper()
	_, body, err := get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(body, "\n") {
		// Every reason's series exists from the start, at 0: only a
		// count above 0 is a refusal.
		if strings.HasPrefix(l, "toolgate_sidecar_bundle_rejected_total{") && !strings.HasSuffix(l, "} 0") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "; ")
}

func TestKeyRotationKeepsSidecarsServing(t *testing.T) {
	sns, ns := testenv.Namespace(t, k8s, "mgr-"), testenv.Namespace(t, k8s, "mgr-")
	ctx := context.Background()
	stop := runInBackground(t, signingOptions(t, sns, ns))
	createPolicy(t, ns, "p")
	publishedKeys(t, sns)
	old := secretKeyring(t, sns).Current()
	testenv.Eventually(t, "the first signed bundle", func() (bool, string) {
		_, err := bundleSignature(t, ns, secretKeyring(t, sns).Trusted())
		return err == nil, fmt.Sprint(err)
	})
	must(t, stop())

	// Step 1: a new key is added; restarted, the manager publishes both and
	// sidecars started from now on trust both. Nothing is re-signed yet.
	ring, err := RotateSigningKeys(ctx, k8s, sns, bundle.SigningKeySecretName, RotateAdd, "", false)
	must(t, err)
	next := ring.Keys()[1]
	stop = runInBackground(t, signingOptions(t, sns, ns))
	testenv.Eventually(t, "both keys published", func() (bool, string) {
		return string(publishedKeys(t, sns)) == string(ring.PublicPEM()), "not yet"
	})
	keysFile := filepath.Join(t.TempDir(), "keys.pem")
	must(t, os.WriteFile(keysFile, publishedKeys(t, sns), 0o600))
	o := sidecar.DefaultOptions()
	o.ConfigMap, o.TrustedKeys = ns+"/"+bundle.DefaultConfigMapName, keysFile
	base := runSidecar(t, o)
	rev := bundleRevision(t, ns)
	testenv.Eventually(t, "the sidecar serving the old key's bundle", func() (bool, string) {
		r := sidecarReadyz(t, base)
		return r.Ready && r.BundleRevision == rev, fmt.Sprintf("%+v", r)
	})
	must(t, stop())

	// Step 2: the new key signs; the restarted manager re-signs the bundle.
	_, err = RotateSigningKeys(ctx, k8s, sns, bundle.SigningKeySecretName, RotatePromote, next.ID(), false)
	must(t, err)
	stop = runInBackground(t, signingOptions(t, sns, ns))
	testenv.Eventually(t, "the bundle re-signed with the new key", func() (bool, string) {
		s, err := bundleSignature(t, ns, ring.Trusted())
		return err == nil && s.KeyID == next.ID(), fmt.Sprint(s.KeyID, err)
	})
	createPolicy(t, ns, "q") // and a new bundle signed with it
	testenv.Eventually(t, "the sidecar serving the new key's new bundle", func() (bool, string) {
		r := sidecarReadyz(t, base)
		return r.Ready && r.BundleRevision != rev && r.BundleRevision == bundleRevision(t, ns), fmt.Sprintf("%+v", r)
	})
	must(t, stop())

	// Step 3: the old key is retired and no longer published.
	_, err = RotateSigningKeys(ctx, k8s, sns, bundle.SigningKeySecretName, RotateRetire, old.ID(), false)
	must(t, err)
	runInBackground(t, signingOptions(t, sns, ns))
	testenv.Eventually(t, "only the new key published", func() (bool, string) {
		trusted, err := bundle.ParseTrustedKeys(publishedKeys(t, sns))
		return err == nil && len(trusted.IDs()) == 1 && trusted.IDs()[0] == next.ID(), fmt.Sprint(err)
	})
	if r := sidecarReadyz(t, base); !r.Ready || r.LastRejected != nil {
		t.Fatalf("after the rotation the sidecar reports %+v", r)
	}
	if got := rejectedTotal(t, base); got != "" {
		t.Fatalf("bundles refused during the rotation: %s", got)
	}
	if _, err := RotateSigningKeys(ctx, k8s, sns, bundle.SigningKeySecretName, RotateRetire, next.ID(), false); err == nil {
		t.Fatal("retiring the only, signing key succeeded")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// selfSignedCert writes tls.crt and tls.key for 127.0.0.1 into dir and
// returns the certificate PEM (the webhook's caBundle).
func selfSignedCert(t *testing.T, dir string) []byte {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	must(t, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	must(t, err)
	crt := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	must(t, os.WriteFile(filepath.Join(dir, "tls.crt"), crt, 0o600))
	must(t, os.WriteFile(filepath.Join(dir, "tls.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	return crt
}

// TestInjectedSidecarTrustsOperatorKeys runs the whole chain: the manager
// (keys, signing, injector) as `toolgate manager` runs it, a Pod admitted
// through kube-apiserver's mutating webhook call, and the injected
// container's own arguments run as the real sidecar loop against the bundle
// ConfigMap. Then a namespace editor's forged bundle is refused.
func TestInjectedSidecarTrustsOperatorKeys(t *testing.T) {
	sns, ns := testenv.Namespace(t, k8s, "mgr-"), testenv.Namespace(t, k8s, "mgr-")
	ctx := context.Background()
	certDir := t.TempDir()
	caBundle := selfSignedCert(t, certDir)
	_, port, err := net.SplitHostPort(testenv.FreeLoopbackAddr(t))
	must(t, err)
	o := signingOptions(t, sns, ns)
	o.Webhooks.Enabled, o.Webhooks.CertMode, o.Webhooks.CertDir = true, webhook.CertsProvided, certDir
	o.Webhooks.Host = "127.0.0.1"
	_, err = fmt.Sscan(port, &o.Webhooks.Port)
	must(t, err)
	o.Webhooks.SidecarImage = "toolgate:test"
	runInBackground(t, o)

	url := fmt.Sprintf("https://127.0.0.1:%s/mutate-v1-pod", port)
	fail, none := admissionv1.Fail, admissionv1.SideEffectClassNoneOnDryRun
	mwc := &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "toolgate-signing-test-" + ns},
		Webhooks: []admissionv1.MutatingWebhook{{
			Name: "mpod.toolgate.dev", ClientConfig: admissionv1.WebhookClientConfig{URL: &url, CABundle: caBundle},
			Rules: []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create},
				Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
			MatchConditions:         webhook.InjectMatchConditions(),
		}}}
	must(t, k8s.Create(ctx, mwc))
	t.Cleanup(func() { _ = k8s.Delete(context.Background(), mwc) })

	createPolicy(t, ns, "deny-all")
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "agent",
		Annotations: map[string]string{v1alpha1.AnnotationInject: "true", v1alpha1.AnnotationAgentID: "agent-1"}},
		Spec: corev1.PodSpec{ServiceAccountName: "agent-sa", Containers: []corev1.Container{{Name: "agent", Image: "agent:1"}}}}
	testenv.Eventually(t, "the Pod admitted through the injector", func() (bool, string) {
		err := k8s.Create(ctx, pod.DeepCopy())
		return err == nil, fmt.Sprint(err) // the webhook server may still be starting
	})
	var stored corev1.Pod
	must(t, k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: "agent"}, &stored))
	var args []string
	for _, c := range append(stored.Spec.InitContainers, stored.Spec.Containers...) {
		if c.Name == webhook.SidecarName {
			args = c.Args
		}
	}
	if len(args) == 0 || args[0] != "sidecar" {
		t.Fatalf("no injected sidecar in %+v", stored.Spec)
	}
	// What kubelet does with $(VAR) references, then the sidecar's own flags.
	expand := strings.NewReplacer("$(POD_NAMESPACE)", ns, "$(POD_NAME)", "agent", "$(POD_UID)", string(stored.UID), "$(TOOLGATE_AGENT_ID)", "agent-1")
	so := sidecar.DefaultOptions()
	fs := pflag.NewFlagSet("sidecar", pflag.ContinueOnError)
	so.AddFlags(fs)
	for i := range args {
		args[i] = expand.Replace(args[i])
	}
	must(t, fs.Parse(args[1:]))
	if so.TrustedKeysPEM != string(publishedKeys(t, sns)) {
		t.Fatalf("the injected --trusted-keys-pem is not the published keys.pem:\n%s", so.TrustedKeysPEM)
	}
	so.CacheDir = t.TempDir()
	base := runSidecar(t, so)
	testenv.Eventually(t, "the injected sidecar serving the signed bundle", func() (bool, string) {
		r := sidecarReadyz(t, base)
		return r.Ready && r.BundleRevision == bundleRevision(t, ns), fmt.Sprintf("%+v", r)
	})
	signedRev := sidecarReadyz(t, base).BundleRevision

	// A namespace editor replaces the bundle with an unsigned allow-all.
	doc, _, err := engine.Encode(engine.Bundle{Policies: []engine.Policy{{ID: "allow-all", Version: 1, DefaultEffect: "allow"}}})
	must(t, err)
	var cm corev1.ConfigMap
	must(t, k8s.Get(ctx, types.NamespacedName{Namespace: ns, Name: bundle.DefaultConfigMapName}, &cm))
	cm.Data = map[string]string{bundle.Key: string(doc)}
	must(t, k8s.Update(ctx, &cm))
	testenv.Eventually(t, "the forged bundle refused", func() (bool, string) {
		return strings.Contains(rejectedTotal(t, base), `reason="unsigned"`), rejectedTotal(t, base)
	})
	if r := sidecarReadyz(t, base); r.BundleRevision != signedRev {
		t.Fatalf("the sidecar serves %s after the forgery, want %s", r.BundleRevision, signedRev)
	}

	// A key added while the manager runs is handed to the Pods admitted
	// from then on, without a restart.
	ring, err := RotateSigningKeys(ctx, k8s, sns, bundle.SigningKeySecretName, RotateAdd, "", false)
	must(t, err)
	for i := 0; ; i++ {
		later := pod.DeepCopy()
		later.Name = fmt.Sprintf("agent-later-%d", i)
		must(t, k8s.Create(ctx, later))
		got := injectedArg(t, ns, later.Name, "--trusted-keys-pem=")
		if got == string(ring.PublicPEM()) {
			break
		}
		if i == 50 {
			t.Fatalf("Pods admitted after add still get only\n%s", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// injectedArg is the value of the injected sidecar's argument with prefix.
func injectedArg(t *testing.T, ns, name, prefix string) string {
	t.Helper()
	var p corev1.Pod
	must(t, k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &p))
	for _, c := range append(p.Spec.InitContainers, p.Spec.Containers...) {
		if c.Name != webhook.SidecarName {
			continue
		}
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, prefix); ok {
				return v
			}
		}
	}
	t.Fatalf("no injected %s in Pod %s/%s", prefix, ns, name)
	return ""
}

func TestSigningKeyCommandRotates(t *testing.T) {
	sns := testenv.Namespace(t, k8s, "mgr-")
	run := func(args ...string) string {
		t.Helper()
		cmd := NewCommand()
		var out strings.Builder
		cmd.SetOut(&out)
		cmd.SetArgs(append([]string{"signing-key", "-n", sns, "--kubeconfig", testenv.WriteKubeconfig(t, kubeconfig)}, args...))
		must(t, cmd.Execute())
		return out.String()
	}
	first := strings.Fields(run("list"))
	if len(first) != 2 || first[1] != "signing" {
		t.Fatalf("list on first use: %q, want one new signing key", first)
	}
	added := strings.Fields(run("add"))
	if len(added) != 4 || added[0] != first[0] || added[3] != "trusted" {
		t.Fatalf("add: %q", added)
	}
	promoted := strings.Fields(run("promote", added[2]))
	if promoted[0] != added[2] || promoted[1] != "signing" {
		t.Fatalf("promote: %q", promoted)
	}
	if got := strings.Fields(run("retire", first[0])); len(got) != 2 || got[0] != added[2] {
		t.Fatalf("retire: %q", got)
	}
	cmd := NewCommand()
	cmd.SetArgs([]string{"signing-key", "-n", sns, "--kubeconfig", testenv.WriteKubeconfig(t, kubeconfig), "retire", "ed25519:nope"})
	cmd.SetOut(new(strings.Builder))
	cmd.SetErr(new(strings.Builder))
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "no key") {
		t.Fatalf("retiring an unknown key: %v", err)
	}
}
