package controllers_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
)

// TestPinsArePublishedWithoutRegisteringAgents: an MCPUpstream's pins
// reach the namespace's bundle (schema version 6, pinning strict written
// out when unset) in a namespace whose agents are not registered, which
// they leave unregistered; the API server refuses malformed pins, saying
// why.
func TestPinsArePublishedWithoutRegisteringAgents(t *testing.T) {
	ctx := context.Background()
	ns := testenv.Namespace(t, k8s, "tg-pins-")
	startManager(t, controllers.Options{}, ns)
	create(t, policy(ns, "base", 1))
	digest := strings.Repeat("5e", 32)
	create(t, &v1alpha1.MCPUpstream{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "files"},
		Spec: v1alpha1.MCPUpstreamSpec{URL: "https://mcp.example/files", PinnedTools: map[string]v1alpha1.ToolDigest{"read_file": v1alpha1.ToolDigest(digest)}}})

	_, b := testenv.WaitForBundle(t, k8s, ns, bundle.DefaultConfigMapName, "the pins published", func(b engine.Bundle) bool { return len(b.Pins) == 1 })
	p := b.PinsFor("files")
	if p == nil || p.Pinning != string(v1alpha1.PinningStrict) || p.Tools["read_file"] != digest || len(p.Tools) != 1 {
		t.Errorf("published pins %+v, want files strict read_file=%s", b.Pins, digest)
	}
	if b.Identity != nil || b.SchemaVersion != engine.SchemaVersionResults {
		t.Errorf("identity %+v, schema %d: pins must not register agents, and need schema %d", b.Identity, b.SchemaVersion, engine.SchemaVersionResults)
	}

	for name, spec := range map[string]v1alpha1.MCPUpstreamSpec{
		"upper":      {URL: "https://x.example/", PinnedTools: map[string]v1alpha1.ToolDigest{"a": v1alpha1.ToolDigest(strings.ToUpper(digest))}},
		"bad-name":   {URL: "https://x.example/", PinnedTools: map[string]v1alpha1.ToolDigest{"a b": v1alpha1.ToolDigest(digest)}},
		"no-pins":    {URL: "https://x.example/", Pinning: v1alpha1.PinningWarn},
		"bad-mode":   {URL: "https://x.example/", Pinning: "loose", PinnedTools: map[string]v1alpha1.ToolDigest{"a": v1alpha1.ToolDigest(digest)}},
		"empty-pins": {URL: "https://x.example/", PinnedTools: map[string]v1alpha1.ToolDigest{}, Pinning: v1alpha1.PinningStrict},
	} {
		err := k8s.Create(ctx, &v1alpha1.MCPUpstream{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec})
		if err == nil || !strings.Contains(err.Error(), "spec") {
			t.Errorf("%s: create returned %v, want it refused naming the field", name, err)
		}
	}
}
