package controllers_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/rego"
)

// manifestRevision is the revision in the Rego bundle's .manifest.
func manifestRevision(t *testing.T, files map[string]string) string {
	t.Helper()
	var m struct {
		Revision string `json:"revision"`
	}
	if err := json.Unmarshal([]byte(files[rego.ManifestFile]), &m); err != nil {
		t.Fatalf(".manifest: %v", err)
	}
	return m.Revision
}

// waitForRego waits until the namespace's ConfigMap carries a Rego bundle
// of the published bundle's revision, and returns both.
func waitForRego(t *testing.T, ns string, ok func(engine.Bundle) bool) (*corev1.ConfigMap, engine.Bundle, map[string]string) {
	t.Helper()
	var cm *corev1.ConfigMap
	var b engine.Bundle
	var files map[string]string
	testenv.Eventually(t, "the Rego bundle published", func() (bool, string) {
		cm, b = testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "bundle", ok)
		raw := cm.BinaryData[bundle.RegoTarKey]
		if raw == nil {
			return false, "no binaryData." + bundle.RegoTarKey
		}
		_, files = testenv.Untar(t, raw, "/")
		rev := manifestRevision(t, files)
		return rev == b.Revision, "Rego bundle revision " + rev + ", bundle " + b.Revision
	})
	return cm, b, files
}

func TestPublishRegoAddsTheOPABundleAndRewritesOnlyOnChange(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-")
	opts := controllers.Options{PublishRego: true}
	mgr := startManager(t, opts, ns)
	create(t, policy(ns, "guard", 2))
	cm, b, files := waitForRego(t, ns, func(b engine.Bundle) bool { return len(b.Policies) == 1 })

	// Exactly what `toolgate export rego --tar` writes for that bundle.
	out, err := rego.Export(b)
	if err != nil {
		t.Fatal(err)
	}
	want, err := out.Tar(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(cm.BinaryData[bundle.RegoTarKey], want) {
		t.Fatal("the published Rego bundle is not rego.Export(bundle).Tar(nil) of the published bundle")
	}
	if _, signed := files[rego.SignaturesFile]; signed {
		t.Error("an unsigned operator published .signatures.json")
	}
	if !strings.Contains(files[rego.PolicyFile], `"r1"`) {
		t.Errorf("policy.rego does not carry rule r1:\n%s", files[rego.PolicyFile])
	}
	waitForPolicyReady(t, ns, "guard", v1alpha1.ReasonPublished)

	// Unchanged content: no write, the same bytes.
	republishWritesNothing(t, mgr, opts, ns, "an unchanged bundle")

	// A policy change: a new Rego bundle for the new revision.
	var p v1alpha1.Policy
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "guard"}, &p); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(p.DeepCopy())
	p.Spec.Rules = append(p.Spec.Rules, policy(ns, "x", 3).Spec.Rules[2])
	if err := k8s.Patch(context.Background(), &p, patch); err != nil {
		t.Fatal(err)
	}
	_, b2, files := waitForRego(t, ns, func(b engine.Bundle) bool { return len(b.Policies) == 1 && len(b.Policies[0].Rules) == 3 })
	if b2.Revision == b.Revision || !strings.Contains(files[rego.PolicyFile], `"r2"`) {
		t.Fatalf("after the change: revision %s (was %s), policy.rego without rule r2", b2.Revision, b.Revision)
	}
}

func TestPublishRegoSignsForOPAWithTheCurrentKey(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-")
	key, old := newSigningKey(t), newSigningKey(t)
	startManager(t, controllers.Options{PublishRego: true, Keys: controllers.NewSigningKeys(signingKeys(t, key, old))}, ns)
	create(t, policy(ns, "guard", 1))
	_, _, files := waitForRego(t, ns, func(b engine.Bundle) bool { return len(b.Policies) == 1 })

	var sigs struct {
		Signatures []string `json:"signatures"`
	}
	if err := json.Unmarshal([]byte(files[rego.SignaturesFile]), &sigs); err != nil || len(sigs.Signatures) != 1 {
		t.Fatalf(".signatures.json %q: %v", files[rego.SignaturesFile], err)
	}
	parts := strings.Split(sigs.Signatures[0], ".")
	if len(parts) != 3 {
		t.Fatalf("not a compact JWS: %q", sigs.Signatures[0])
	}
	dec := base64.RawURLEncoding
	header, _ := dec.DecodeString(parts[0])
	var h map[string]string
	if err := json.Unmarshal(header, &h); err != nil || h["alg"] != "EdDSA" || h["kid"] != key.ID() {
		t.Fatalf("JWS header %s (%v): want EdDSA and kid %s", header, err, key.ID())
	}
	sig, _ := dec.DecodeString(parts[2])
	if !ed25519.Verify(key.Public(), []byte(parts[0]+"."+parts[1]), sig) {
		t.Fatal("the JWS does not verify with the current key")
	}
	payload, _ := dec.DecodeString(parts[1])
	var claims struct {
		Files []struct{ Name, Hash, Algorithm string } `json:"files"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range claims.Files {
		names = append(names, f.Name)
		if f.Algorithm != "SHA-256" || len(f.Hash) != 64 {
			t.Errorf("file %+v", f)
		}
	}
	if strings.Join(names, " ") != ".manifest toolgate/policy.rego data.json" {
		t.Errorf("signed files %v", names)
	}
	// The JSON bundle is still signed the toolgate way.
	signatureOf(t, ns, signingKeys(t, key).Trusted())
}

// RegoUnsigned leaves the OPA signature out, for OPAs whose configuration
// file cannot name an EdDSA key; the JSON bundle stays signed.
func TestPublishRegoUnsignedForOPAConfigurations(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-")
	key := newSigningKey(t)
	startManager(t, controllers.Options{PublishRego: true, RegoUnsigned: true, Keys: controllers.NewSigningKeys(signingKeys(t, key))}, ns)
	create(t, policy(ns, "guard", 1))
	_, _, files := waitForRego(t, ns, func(b engine.Bundle) bool { return len(b.Policies) == 1 })
	if sig, ok := files[rego.SignaturesFile]; ok {
		t.Errorf("--rego-unsigned published .signatures.json: %s", sig)
	}
	signatureOf(t, ns, signingKeys(t, key).Trusted())
}

// The Rego bundle counts against MaxStoredBytes: a namespace whose JSON
// bundle fits alone but not with it is BundleTooLarge, and says why.
func TestPublishRegoCountsAgainstTheSizeLimit(t *testing.T) {
	small := policy("", "guard", 1)
	b := bundle.Build([]v1alpha1.Policy{*small}, nil, time.Now())
	doc, rev, err := engine.Encode(b)
	if err != nil {
		t.Fatal(err)
	}
	b.Revision = rev
	out, err := rego.Export(b)
	if err != nil {
		t.Fatal(err)
	}
	tar, _ := out.Tar(nil)
	limit := len(doc) + len(tar)/2 // the document fits, the two do not

	ns := testenv.Namespace(t, k8s, "tg-")
	startManager(t, controllers.Options{PublishRego: true, MaxStoredBytes: limit}, ns)
	create(t, policy(ns, "guard", 1))
	p := waitForPolicyReady(t, ns, "guard", v1alpha1.ReasonBundleTooLarge)
	msg := readyOf(p.Status.Conditions).Message
	for _, want := range []string{"Rego bundle", "--publish-rego"} {
		if !strings.Contains(msg, want) {
			t.Errorf("BundleTooLarge message %q does not say %q", msg, want)
		}
	}
	if _, found := getBundleConfigMap(t, ns); found {
		t.Error("a bundle was published past the limit")
	}

	// The same limit without the Rego bundle: published.
	ns2 := testenv.Namespace(t, k8s, "tg-")
	startManager(t, controllers.Options{MaxStoredBytes: limit}, ns2)
	create(t, policy(ns2, "guard", 1))
	waitForPolicyReady(t, ns2, "guard", v1alpha1.ReasonPublished)
}

// A policy the exporter refuses must not hold back the JSON bundle: it is
// published without the Rego bundle, and the policy says why (Ready=True,
// RegoExportRefused, with a Warning event).
func TestPolicyRegoCannotExpressStillPublishesTheJSONBundle(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-")
	startManager(t, controllers.Options{PublishRego: true}, ns)
	create(t, policy(ns, "fine", 1))
	odd := policy(ns, "unicode", 1)
	odd.Spec.Rules[0].Conditions[1] = v1alpha1.Condition{Field: "input.command", Operator: "matches", Value: jsonValue(`"\\pL+"`)}
	create(t, odd)

	cm, b := testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "both policies published", func(b engine.Bundle) bool { return len(b.Policies) == 2 })
	if _, ok := cm.BinaryData[bundle.RegoTarKey]; ok {
		t.Fatal("a Rego bundle was published although a policy cannot be exported")
	}
	p := waitForPolicyReady(t, ns, "unicode", v1alpha1.ReasonRegoExportRefused)
	ready := readyOf(p.Status.Conditions)
	if ready.Status != "True" || p.Status.BundleRevision != b.Revision || !strings.Contains(ready.Message, `\\p`) ||
		!strings.Contains(ready.Message, bundle.RegoTarKey) {
		t.Errorf("status %+v: want Ready=True, live in %s, naming the refused pattern and the missing key", p.Status, b.Revision)
	}
	waitForEvent(t, ns, "unicode", "Warning", v1alpha1.ReasonRegoExportRefused)
	// fine, created first, went live in b or in the revision before.
	if f := waitForPolicyReady(t, ns, "fine", v1alpha1.ReasonPublished); f.Status.BundleRevision == "" {
		t.Errorf("fine: live in %q, want a revision", f.Status.BundleRevision)
	}
	c, diags := engine.Compile(b)
	if len(diags) != 0 {
		t.Fatalf("the engine compiles \\pL: %v", diags)
	}
	if r := c.Evaluate(engine.Request{"tool_name": "tool_0", "input": map[string]any{"command": "é"}}, engine.EvalOptions{}); r.MatchedPolicyID != "unicode" {
		t.Errorf("the published bundle decides %+v", r)
	}

	// Fixed: the Rego bundle comes back.
	var cur v1alpha1.Policy
	if err := k8s.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: "unicode"}, &cur); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(cur.DeepCopy())
	cur.Spec.Rules[0].Conditions[1].Value = jsonValue(`"[a-z]+"`)
	if err := k8s.Patch(context.Background(), &cur, patch); err != nil {
		t.Fatal(err)
	}
	waitForRego(t, ns, func(b engine.Bundle) bool {
		return len(b.Policies) == 2 && b.Revision != cm.Annotations[v1alpha1.RevisionAnnotation]
	})
	waitForPolicyReady(t, ns, "unicode", v1alpha1.ReasonPublished)
}
