package chart

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestValueMistakesFailTheInstall: the schema turns typos and wrong types
// into errors naming the field, instead of silently ignored values.
func TestValueMistakesFailTheInstall(t *testing.T) {
	t.Parallel()
	badFile := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(badFile, []byte("sidecarInjection:\n  resources:\n    limits:\n      memory: lots\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string // in the error
	}{
		{"top-level typo", []string{"--set", "replicaCont=2"}, "replicaCont"},
		{"nested typo", []string{"--set", "crds.keeep=false"}, "keeep"},
		{"deep typo", []string{"--set", "manager.resources.limits.cpuu=1"}, "cpuu"},
		{"string for integer", []string{"--set", "replicaCount=two"}, "replicaCount"},
		{"zero replicas", []string{"--set", "replicaCount=0"}, "replicaCount"},
		{"string for boolean", []string{"--set-string", "crds.enabled=yes"}, "enabled"},
		{"unknown pull policy", []string{"--set", "image.pullPolicy=Sometimes"}, "pullPolicy"},
		{"bad namespace name", []string{"--set", "manager.namespaces={Team_A}"}, "namespaces"},
		{"bad log level", []string{"--set", "manager.logLevel=verbose"}, "logLevel"},
		{"port out of range", []string{"--set", "webhook.port=70000"}, "port"},
		{"bad digest", []string{"--set", "image.digest=latest"}, "digest"},
		{"bad quantity from a file", []string{"-f", badFile}, "memory"},
		{"bad listen address", []string{"--set", "sidecarInjection.listen=localhost"}, "listen"},
		{"extra arg without dashes", []string{"--set", "manager.extraArgs={verbose}"}, "extraArgs"},
		{"cluster name with a space", []string{"--set", "clusterName=prod eu"}, "clusterName"},
		{"cluster name with a variable", []string{"--set", "clusterName=$(HOME)"}, "clusterName"},
		{"usage store with a password", []string{"--set", "usage.redis.url=redis://u:pw@redis:6379/0"}, "url"},
		{"usage store over http", []string{"--set", "usage.redis.url=http://redis:6379"}, "url"},
		{"usage store with a variable", []string{"--set", "usage.redis.url=redis://$(NS):6379/0"}, "url"},
		{"usage store password secret not a name", []string{"--set", "usage.redis.passwordSecret=Redis_PW"}, "passwordSecret"},
		{"usage store typo", []string{"--set", "usage.redis.uri=redis://redis:6379/0"}, "uri"},
		{"native sidecar as a string", []string{"--set-string", "sidecarInjection.nativeSidecar=yes"}, "nativeSidecar"},
		{"metrics port out of range", []string{"--set", "sidecarInjection.metricsPort=70000"}, "metricsPort"},
		{"prometheus rule typo", []string{"--set", "metrics.prometheusRule.enabeld=true"}, "enabeld"},
		{"pod monitor typo", []string{"--set", "metrics.podMonitor.enable=true"}, "enable"},
		{"unknown issuer kind", []string{"--set", "certManager.issuerRef.kind=Vault"}, "kind"},
		{"relative socket", []string{"--set", "sidecarInjection.socket=run/toolgate.sock"}, "socket"},
		{"socket with a variable", []string{"--set", "sidecarInjection.socket=/var/run/$(X)/tg.sock"}, "socket"},
		{"socket path too long", []string{"--set", "sidecarInjection.socket=/var/run/toolgate/" + strings.Repeat("s", 100)}, "socket"},
		{"listen as a socket", []string{"--set", "sidecarInjection.listen=unix:/run/x.sock"}, "listen"},
		{"sidecar as root", []string{"--set", "sidecarInjection.runAsUser=0"}, "runAsUser"},
		{"sidecar group as a string", []string{"--set-string", "sidecarInjection.runAsGroup=nobody"}, "runAsGroup"},
		{"network policy typo", []string{"--set", "networkPolicy.enable=true"}, "enable"},
		{"network policy bad namespace", []string{"--set", "networkPolicy.namespaces={Team_A}"}, "namespaces"},
		{"network policy selector typo", []string{"--set", "networkPolicy.monitoringNamespaceSelector.matchLabel.a=b"}, "matchLabel"},
		{"network policy bad operator", []string{"--set", "networkPolicy.monitoringPodSelector.matchExpressions[0].key=app",
			"--set", "networkPolicy.monitoringPodSelector.matchExpressions[0].operator=Is"}, "operator"},
		{"allow other ports as a string", []string{"--set-string", "networkPolicy.allowOtherPorts=yes"}, "allowOtherPorts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := helmTemplate(tc.args...)
			if err == nil {
				t.Fatalf("helm template %v succeeded:\n%.300s", tc.args, out)
			}
			if !strings.Contains(err.Error(), "schema") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("want a schema error naming %q, got: %v", tc.want, err)
			}
		})
	}
}

// TestValidValuesPass is the control for the test above: the same fields,
// spelled right, render.
func TestValidValuesPass(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"--set", "replicaCount=3", "--set", "crds.keep=false", "--set", "manager.resources.limits.cpu=2"},
		{"--set", "image.pullPolicy=Always", "--set", "manager.namespaces={team-a}", "--set", "manager.logLevel=debug"},
		{"--set", "image.digest=sha256:" + strings.Repeat("0", 64), "--set", "manager.extraArgs={--zap-devel=true}"},
		{"--set", "podDisruptionBudget.minAvailable=50%", "--set", "metrics.serviceMonitor.scrapeTimeout=10s"},
		{"--set", "sidecarInjection.socket=", "--set", "sidecarInjection.runAsUser=1234", "--set", "sidecarInjection.runAsGroup=1234"},
		{"--set", "sidecarInjection.listen=", "--set", "sidecarInjection.socket=/run/agent-gate/gate.sock"},
		{"--set", "networkPolicy.enabled=true", "--set", "networkPolicy.namespaces={agents}",
			"--set", "networkPolicy.monitoringPodSelector.matchExpressions[0].key=app",
			"--set", "networkPolicy.monitoringPodSelector.matchExpressions[0].operator=In",
			"--set", "networkPolicy.monitoringPodSelector.matchExpressions[0].values={prometheus}"},
	} {
		if _, err := helmTemplate(args...); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
}

type schema = map[string]any

func loadSchema(t *testing.T) schema {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(testenv.ChartDir(), "values.schema.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s schema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatalf("values.schema.json: %v", err)
	}
	if s["$schema"] != "http://json-schema.org/draft-07/schema#" {
		t.Errorf("$schema %v, want draft-07", s["$schema"])
	}
	return s
}

// TestSchemaIsClosed: every object with declared properties refuses others,
// or a typo there would pass.
func TestSchemaIsClosed(t *testing.T) {
	t.Parallel()
	var walk func(path string, node any)
	walk = func(path string, node any) {
		switch n := node.(type) {
		case map[string]any:
			if _, ok := n["properties"]; ok && n["additionalProperties"] != false {
				t.Errorf("%s declares properties but not additionalProperties: false", path)
			}
			for k, v := range n {
				walk(path+"/"+k, v)
			}
		case []any:
			for i, v := range n {
				walk(path+"/"+strconv.Itoa(i), v)
			}
		}
	}
	walk("#", loadSchema(t))
}

// TestValuesAreDocumentedAndDeclared: each key of values.yaml is declared in
// the schema, each leaf has a comment, and each declared property has a
// default in values.yaml (so it is documented there). A Kubernetes type
// (resources, a label selector) is documented as a whole by the comment on
// its key.
func TestValuesAreDocumentedAndDeclared(t *testing.T) {
	t.Parallel()
	root := loadSchema(t)
	raw, err := os.ReadFile(filepath.Join(testenv.ChartDir(), "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	var walk func(path string, m *yaml.Node, s schema, kubernetesType bool)
	walk = func(path string, m *yaml.Node, s schema, kubernetesType bool) {
		props := properties(root, s)
		seen := map[string]bool{}
		for i := 0; i+1 < len(m.Content); i += 2 {
			key, value := m.Content[i], m.Content[i+1]
			p := path + key.Value
			seen[key.Value] = true
			sub, ok := props[key.Value]
			if !ok && kubernetesType && freeForm(root, s) {
				continue // a map's own keys, such as matchLabels'
			}
			if !ok {
				t.Errorf("values.yaml %s is not declared in values.schema.json", p)
				continue
			}
			whole := slices.Contains([]any{"#/definitions/resources", "#/definitions/sidecarResources", "#/definitions/labelSelector",
				"#/definitions/podSecurityContext", "#/definitions/securityContext"}, sub["$ref"])
			leaf := value.Kind != yaml.MappingNode || len(value.Content) == 0
			if (leaf || whole) && !kubernetesType && strings.TrimSpace(key.HeadComment) == "" {
				t.Errorf("values.yaml %s has no comment", p)
			}
			if !leaf {
				walk(p+".", value, sub, kubernetesType || whole)
			}
		}
		for name := range props {
			// Keys of older charts stay declared, marked deprecated, so the
			// templates can name their replacement instead of the schema
			// refusing them as unknown.
			if deprecated, _ := props[name]["deprecated"].(bool); deprecated {
				continue
			}
			if !seen[name] && name != "global" && !kubernetesType {
				t.Errorf("values.schema.json declares %s%s, which values.yaml neither sets nor documents", path, name)
			}
		}
	}
	walk("", doc.Content[0], root, false)
}

// freeForm tells whether s (through its $ref) is a map of any keys.
func freeForm(root, s schema) bool {
	if ref, ok := s["$ref"].(string); ok {
		d, _ := root["definitions"].(map[string]any)[strings.TrimPrefix(ref, "#/definitions/")].(map[string]any)
		return freeForm(root, d)
	}
	_, ok := s["additionalProperties"].(map[string]any)
	return ok
}

// properties collects the declared properties of s, following $ref and
// allOf.
func properties(root, s schema) map[string]schema {
	out := map[string]schema{}
	if ref, ok := s["$ref"].(string); ok {
		def := strings.TrimPrefix(ref, "#/definitions/")
		d, _ := root["definitions"].(map[string]any)[def].(map[string]any)
		for k, v := range properties(root, d) {
			out[k] = v
		}
	}
	if parts, ok := s["allOf"].([]any); ok {
		for _, p := range parts {
			for k, v := range properties(root, p.(map[string]any)) {
				out[k] = v
			}
		}
	}
	if props, ok := s["properties"].(map[string]any); ok {
		for k, v := range props {
			if existing, ok := out[k]; ok {
				// allOf adds constraints to a property declared by a $ref.
				merged := schema{"allOf": []any{existing, v}}
				out[k] = merged
				continue
			}
			out[k] = v.(map[string]any)
		}
	}
	return out
}
