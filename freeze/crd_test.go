package freeze

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// The CRD's rules on updates (CEL transition rules, which internal/crdschema
// does not run: it checks creates only) are tested here, against the real
// API server the commands talk to.

func frozenAgentObject(name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(v1alpha1.GroupVersion.WithKind("FrozenAgent"))
	u.SetNamespace(unwatched)
	u.SetName(name)
	return u
}

func update(t *testing.T, u *unstructured.Unstructured, spec map[string]any) error {
	t.Helper()
	if err := k8sClient.Get(context.Background(), client.ObjectKeyFromObject(u), u); err != nil {
		t.Fatal(err)
	}
	u.Object["spec"] = spec
	return k8sClient.Update(context.Background(), u)
}

// TestAllAgentsIsImmutable: a freeze of every agent cannot be turned into
// the freeze of one agent in place (that would silently unfreeze every
// other agent), nor the reverse; an explicit allAgents: false is the same
// as none, so writing or dropping it changes nothing and is accepted.
func TestAllAgentsIsImmutable(t *testing.T) {
	removeAfter(t, unwatched, "all-immutable", "explicit-false", "added-false")
	all := frozenAgentObject("all-immutable", map[string]any{"allAgents": true})
	if err := k8sClient.Create(context.Background(), all); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		spec map[string]any
		want string
	}{
		{map[string]any{"allAgents": false, "agentId": "a"}, "allAgents is immutable"},
		{map[string]any{"agentId": "a"}, "allAgents is immutable"},
		{map[string]any{"allAgents": true, "agentId": "a"}, "it takes no agentId or serviceAccount"},
		{map[string]any{"allAgents": true, "serviceAccount": "billing-bot"}, "it takes no agentId or serviceAccount"},
	} {
		if err := update(t, all, tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("update to %v: %v, want %q", tc.spec, err, tc.want)
		}
	}
	if err := update(t, all, map[string]any{"allAgents": true, "reason": "now with a reason"}); err != nil {
		t.Errorf("changing the reason: %v", err)
	}

	one := frozenAgentObject("explicit-false", map[string]any{"agentId": "a", "allAgents": false})
	if err := k8sClient.Create(context.Background(), one); err != nil {
		t.Fatal(err)
	}
	if err := update(t, one, map[string]any{"agentId": "a", "allAgents": true}); err == nil || !strings.Contains(err.Error(), "allAgents is immutable") {
		t.Errorf("turning a freeze of one agent into one of every agent: %v", err)
	}
	// kubectl apply of the same manifest without the line, or a client
	// whose type omits false (as toolgate's own does).
	if err := update(t, one, map[string]any{"agentId": "a"}); err != nil {
		t.Errorf("dropping allAgents: false: %v", err)
	}
	added := frozenAgentObject("added-false", map[string]any{"agentId": "a"})
	if err := k8sClient.Create(context.Background(), added); err != nil {
		t.Fatal(err)
	}
	if err := update(t, added, map[string]any{"agentId": "a", "allAgents": false}); err != nil {
		t.Errorf("writing allAgents: false: %v", err)
	}
}

// TestKubectlGetShowsAnAllAgentsFreeze: `kubectl get frozenagents` prints
// the table the API server renders from the CRD's print columns; a freeze
// of every agent names no agent and no ServiceAccount, so a column must
// say that it freezes them all.
func TestKubectlGetShowsAnAllAgentsFreeze(t *testing.T) {
	removeAfter(t, unwatched, "table-all", "table-one")
	for name, spec := range map[string]map[string]any{
		"table-all": {"allAgents": true},
		"table-one": {"agentId": "one-agent"},
	} {
		if err := k8sClient.Create(context.Background(), frozenAgentObject(name, spec)); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, cfg.Host+"/apis/toolgate.dev/v1alpha1/namespaces/"+unwatched+"/frozenagents", nil)
	if err != nil {
		t.Fatal(err)
	}
	// What kubectl get asks for.
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io,application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("%s: %v\n%s", resp.Status, err, body)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatal(err)
	}
	col := -1
	var shown []string
	for i, c := range table.ColumnDefinitions {
		if c.Priority == 0 {
			shown = append(shown, c.Name)
		}
		if c.Name == "All" && c.Priority == 0 {
			col = i
		}
	}
	if col < 0 {
		t.Fatalf("kubectl get frozenagents shows %v: no All column", shown)
	}
	cells := map[string]any{}
	for _, row := range table.Rows {
		var obj metav1.PartialObjectMetadata
		if err := json.Unmarshal(row.Object.Raw, &obj); err != nil {
			t.Fatal(err)
		}
		cells[obj.Name] = row.Cells[col]
	}
	if cells["table-all"] != true || cells["table-one"] != nil {
		t.Errorf("All column: %v", cells)
	}
}
