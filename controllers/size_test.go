package controllers_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
)

func countRules(b engine.Bundle) int {
	n := 0
	for _, p := range b.Policies {
		n += len(p.Rules)
	}
	return n
}

func TestNamespaceWith2000Rules(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-")
	startManager(t, controllers.Options{}, ns)
	create(t, policyRange(ns, "first", 0, 1000))
	create(t, policyRange(ns, "second", 1000, 2000))

	cm, b := testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "2000 rules published", func(b engine.Bundle) bool { return countRules(b) == 2000 })
	if b.Revision != expectedRevision(t, ns) {
		t.Fatal("published bundle differs from bundle.BuildSources of the objects")
	}
	c, diags := engine.Compile(b)
	if len(diags) != 0 {
		t.Fatalf("diagnostics: %v", diags)
	}
	r := c.Evaluate(engine.Request{"tool_name": "tool_1500", "input": map[string]any{"command": "run danger_1500 now"}}, engine.EvalOptions{})
	if r.Decision != engine.Deny || r.MatchedPolicyID != "second" || r.MatchedRuleID != "r1500" {
		t.Fatalf("decision %+v", r)
	}
	for _, name := range []string{"first", "second"} {
		p := waitForPolicyReady(t, ns, name, v1alpha1.ReasonPublished)
		if p.Status.RuleCount != 1000 {
			t.Errorf("%s: ruleCount %d", name, p.Status.RuleCount)
		}
	}
	t.Logf("2000 rules: %d bytes in %s", len(cm.Data[bundle.Key]), bundle.Key)
}

// bigPolicy has n rules whose descriptions are 1000 characters: repetitive
// (compressible) or random (not).
func bigPolicy(ns, name string, n int, random bool) *v1alpha1.Policy {
	p := policyRange(ns, name, 0, n)
	for i := range p.Spec.Rules {
		if random {
			p.Spec.Rules[i].Description = randomText(1000)
		} else {
			p.Spec.Rules[i].Description = fmt.Sprintf("%04d", i) + strings.Repeat("do not run this tool ", 50)[:996]
		}
	}
	return p
}

func TestOversizedBundleKeepsThePreviousOne(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "tg-")
	startManager(t, controllers.Options{MaxParts: 1}, ns)
	create(t, policy(ns, "small", 1))
	testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "small published", func(b engine.Bundle) bool { return len(b.Policies) == 1 })

	// Past 900 KiB but compressible: stored gzipped in binaryData.
	create(t, bigPolicy(ns, "verbose", 1000, false))
	cm, b := testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "verbose published", func(b engine.Bundle) bool { return len(b.Policies) == 2 })
	if cm.Data[bundle.Key] != "" || len(cm.BinaryData[bundle.GzipKey]) == 0 {
		t.Fatalf("a %d-rule bundle with 1000-character descriptions was not stored gzipped", countRules(b))
	}
	gzipped := b.Revision
	t.Logf("compressible: %d bytes gzipped", len(cm.BinaryData[bundle.GzipKey]))
	waitForPolicyReady(t, ns, "verbose", v1alpha1.ReasonPublished)

	// Random descriptions barely compress: one such policy still fits...
	noiseA, noiseB := bigPolicy(ns, "noise-a", 900, true), bigPolicy(ns, "noise-b", 900, true)
	create(t, noiseA)
	prev, b := testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "noise-a published", func(b engine.Bundle) bool { return len(b.Policies) == 3 })
	t.Logf("one random policy: %d bytes gzipped", len(prev.BinaryData[bundle.GzipKey]))
	waitForPolicyReady(t, ns, "noise-a", v1alpha1.ReasonPublished)

	// Where each generation went live, before the bundle grows too large.
	liveIn := map[string]string{}
	for _, name := range []string{"small", "verbose", "noise-a"} {
		liveIn[name] = waitForPolicyReady(t, ns, name, v1alpha1.ReasonPublished).Status.BundleRevision
	}
	if liveIn["noise-a"] != b.Revision {
		t.Fatalf("noise-a live in %q, want %q", liveIn["noise-a"], b.Revision)
	}

	// ...two do not: the previous bundle stays and every policy says why.
	create(t, noiseB)
	for _, name := range []string{"small", "verbose", "noise-a", "noise-b"} {
		p := waitForPolicyReady(t, ns, name, v1alpha1.ReasonBundleTooLarge)
		if msg := readyOf(p.Status.Conditions).Message; !strings.Contains(msg, "gzipped") {
			t.Errorf("%s: message %q does not explain the size", name, msg)
		}
		want := liveIn[name] // still live in the previous bundle, as before
		if name == "noise-b" {
			want = "" // never published
		}
		if p.Status.BundleRevision != want {
			t.Errorf("%s: status says live in %q, want %q", name, p.Status.BundleRevision, want)
		}
	}
	waitForEvent(t, ns, "noise-b", "Warning", v1alpha1.ReasonBundleTooLarge)
	if cm, _ := getBundleConfigMap(t, ns); cm.ResourceVersion != prev.ResourceVersion {
		t.Fatal("the previous bundle was replaced")
	}

	// Back under the limit: the same content, so the same revisions again.
	remove(t, noiseB)
	p := waitForPolicyReady(t, ns, "verbose", v1alpha1.ReasonPublished)
	if p.Status.BundleRevision != b.Revision {
		t.Fatalf("revision %s after removing noise-b, want %s again", p.Status.BundleRevision, b.Revision)
	}
	remove(t, noiseA)
	_, b = testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "noise-a removed", func(b engine.Bundle) bool { return len(b.Policies) == 2 })
	if b.Revision != gzipped {
		t.Fatalf("revision %s after removing the noise, want %s again", b.Revision, gzipped)
	}
}

// The kill switch must work in a namespace whose policies no longer fit: the
// freeze is published on top of the last policies that did.
func TestFreezeIsPublishedWhileTheBundleIsTooLarge(t *testing.T) {
	ns, before := tooLargeNamespace(t)

	create(t, frozenAgent(ns, "stop-agent-7", "agent-7", nil))
	_, b := testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "the freeze published", func(b engine.Bundle) bool { return len(b.FrozenAgents) == 1 })
	if len(b.Policies) != 2 || b.Policies[0].ID != before.Policies[0].ID || b.Policies[1].ID != before.Policies[1].ID {
		t.Errorf("the freeze should sit on the last published policies, got %d policies", len(b.Policies))
	}
	c, _ := engine.Compile(b)
	if r := c.Evaluate(engine.Request{"tool_name": "Bash", "agent_id": "AGENT-7"}, engine.EvalOptions{}); r.Code != engine.CodeAgentFrozen {
		t.Errorf("the published bundle decides %+v for the frozen agent", r)
	}
	f := waitForFrozenReady(t, ns, "stop-agent-7", v1alpha1.ReasonPublished)
	if f.Status.BundleRevision != b.Revision {
		t.Errorf("FrozenAgent live in %q, bundle is %q", f.Status.BundleRevision, b.Revision)
	}
	waitForPolicyReady(t, ns, "noise-b", v1alpha1.ReasonBundleTooLarge)
}

// tooLargeNamespace is a namespace whose published bundle holds the policies
// small and noise-a (before), and whose policy noise-b is BundleTooLarge.
// Its operator splits no bundle across ConfigMaps (MaxParts 1): past one,
// the namespace is BundleTooLarge.
func tooLargeNamespace(t *testing.T) (ns string, before engine.Bundle) {
	t.Helper()
	ns = testenv.Namespace(t, k8s, "tg-")
	startManager(t, controllers.Options{MaxParts: 1}, ns)
	create(t, policy(ns, "small", 1))
	create(t, bigPolicy(ns, "noise-a", 900, true))
	_, before = testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "two policies published", func(b engine.Bundle) bool { return len(b.Policies) == 2 })
	create(t, bigPolicy(ns, "noise-b", 900, true))
	waitForPolicyReady(t, ns, "noise-b", v1alpha1.ReasonBundleTooLarge)
	return ns, before
}
