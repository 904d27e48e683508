package manifest

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// mixedStream is what `kustomize build` of an application with toolgate
// objects prints: one stream, toolgate's kinds among Kubernetes' own.
var mixedStream = fmt.Sprintf(policyYAML, "p") + `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec: {replicas: 1}
---
apiVersion: v1
kind: Service
metadata: {name: web}
---
apiVersion: v1
kind: List
items:
- {apiVersion: v1, kind: ConfigMap, metadata: {name: c}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: worker}
`

// TestLoadSkipsOtherKindsWhenAsked: with SkipOtherKinds, objects of
// other API groups are counted by kind and are not errors; toolgate's own
// objects load as before.
func TestLoadSkipsOtherKindsWhenAsked(t *testing.T) {
	set, err := LoadWith([]string{Stdin}, strings.NewReader(mixedStream), Options{SkipOtherKinds: true})
	if err != nil {
		t.Fatalf("LoadWith: %v", err)
	}
	if len(set.Policies) != 1 || set.Policies[0].Object.Name != "p" {
		t.Errorf("policies %+v", set.Policies)
	}
	want := map[string]int{"Deployment": 2, "Service": 1, "ConfigMap": 1}
	if !maps.Equal(set.OtherKinds, want) {
		t.Errorf("OtherKinds %v, want %v", set.OtherKinds, want)
	}
}

// TestLoadSkipOtherKindsKeepsToolgateTypos: a typo in a toolgate kind or
// version is still an error; only other API groups are skipped.
func TestLoadSkipOtherKindsKeepsToolgateTypos(t *testing.T) {
	dir := testenv.WriteTree(t, map[string]string{"m.yaml": `apiVersion: toolgate.dev/v1alpha1
kind: Polcy
metadata: {name: typo}
---
apiVersion: toolgate.dev/v1beta1
kind: Policy
metadata: {name: version}
spec: {rules: []}
---
apiVersion: toolgate.dev/v1alpha1
kind: WidgetList
items: []
`})
	_, err := LoadWith([]string{dir}, nil, Options{SkipOtherKinds: true})
	got := errorLines(t, err, dir)
	want := []string{
		`m.yaml:doc 1: Polcy/typo: kind: unknown kind "Polcy" (apiVersion "toolgate.dev/v1alpha1"): toolgate reads Policy, FrozenAgent, Agent, MCPUpstream, ClusterPolicy, ClusterFrozenAgent, PolicyException of toolgate.dev/v1alpha1`,
		`m.yaml:doc 2: Policy/version: apiVersion: unknown apiVersion "toolgate.dev/v1beta1" for Policy: want toolgate.dev/v1alpha1`,
		`m.yaml:doc 3: WidgetList: kind: unknown kind "WidgetList": toolgate reads Policy, FrozenAgent, Agent, MCPUpstream, ClusterPolicy, ClusterFrozenAgent, PolicyException and their lists`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestLoadRefusesOtherKindsByDefault: Load, which eval, bundle and the
// hook use, still refuses a Deployment.
func TestLoadRefusesOtherKindsByDefault(t *testing.T) {
	_, err := Load([]string{Stdin}, strings.NewReader(mixedStream))
	if err == nil || !strings.Contains(err.Error(), `unknown kind "Deployment"`) {
		t.Fatalf("err %v", err)
	}
}
