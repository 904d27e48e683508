package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

const (
	kindPolicy      = "Policy"
	kindFrozenAgent = "FrozenAgent"
	kindAgent       = "Agent"
	kindMCPUpstream = "MCPUpstream"
	// The platform team's kinds: ClusterPolicy and ClusterFrozenAgent are
	// cluster-scoped, PolicyException namespaced.
	kindClusterPolicy      = "ClusterPolicy"
	kindClusterFrozenAgent = "ClusterFrozenAgent"
	kindPolicyException    = "PolicyException"
)

// kinds are the kinds toolgate reads, as messages list them.
const kinds = "Policy, FrozenAgent, Agent, MCPUpstream, ClusterPolicy, ClusterFrozenAgent, PolicyException"

// knownKind tells whether toolgate reads kind.
func knownKind(kind string) bool {
	switch kind {
	case kindPolicy, kindFrozenAgent, kindAgent, kindMCPUpstream, kindClusterPolicy, kindClusterFrozenAgent, kindPolicyException:
		return true
	}
	return false
}

// clusterScoped tells whether kind's objects belong to no namespace.
func clusterScoped(kind string) bool {
	return kind == kindClusterPolicy || kind == kindClusterFrozenAgent
}

// header is what every document must say about itself before it can be
// decoded: apiVersion, kind and, for messages, metadata.name.
type header struct {
	apiVersion, kind, name string
	items                  json.RawMessage
}

// addDocument decodes one document (already JSON) into s, or records why it
// cannot be. A document that is empty or only comments holds nothing.
func (s *Set) addDocument(src Source, doc []byte, errs *Errors) {
	t := bytes.TrimSpace(doc)
	if len(t) == 0 || string(t) == "null" {
		return
	}
	h, ok := readHeader(src, "", t, errs)
	if !ok {
		return
	}
	if h.kind == "List" || (strings.HasSuffix(h.kind, "List") && h.apiVersion == v1alpha1.GroupVersion.String()) {
		s.addList(src, h, errs)
		return
	}
	s.addObject(src, "", h, t, errs)
}

// addList reads a List (what `kubectl get -o yaml` prints) item by item.
func (s *Set) addList(src Source, h header, errs *Errors) {
	fail := func(field, format string, args ...any) {
		*errs = append(*errs, &Error{Source: src, Kind: h.kind, Field: field, Message: fmt.Sprintf(format, args...)})
	}
	if h.kind == "List" && h.apiVersion != "v1" {
		fail("apiVersion", "unknown apiVersion %q for List: want v1", h.apiVersion)
		return
	}
	if want := strings.TrimSuffix(h.kind, "List"); h.kind != "List" && !knownKind(want) {
		fail("kind", "unknown kind %q: toolgate reads %s and their lists", h.kind, kinds)
		return
	}
	var items []json.RawMessage
	if t := bytes.TrimSpace(h.items); len(t) > 0 && string(t) != "null" {
		if err := json.Unmarshal(t, &items); err != nil {
			fail("items", "must be a list of objects")
			return
		}
	}
	for i, item := range items {
		isrc := src
		isrc.Item = i
		prefix := fmt.Sprintf("items[%d].", i)
		ih, ok := readHeader(isrc, prefix, item, errs)
		if !ok {
			continue
		}
		if strings.HasSuffix(ih.kind, "List") {
			*errs = append(*errs, &Error{Source: isrc, Kind: ih.kind, Name: ih.name, Field: prefix + "kind",
				Message: "a List cannot contain another List"})
			continue
		}
		s.addObject(isrc, prefix, ih, item, errs)
	}
}

func readHeader(src Source, prefix string, doc []byte, errs *Errors) (header, bool) {
	fail := func(field, msg string) (header, bool) {
		*errs = append(*errs, &Error{Source: src, Field: field, Message: msg})
		return header{}, false
	}
	var fields map[string]json.RawMessage
	if t := bytes.TrimSpace(doc); len(t) == 0 || t[0] != '{' || json.Unmarshal(t, &fields) != nil {
		return fail(strings.TrimSuffix(prefix, "."), "must be an object with apiVersion, kind, metadata and spec")
	}
	var h header
	var meta struct {
		Name string `json:"name"`
	}
	_ = json.Unmarshal(fields["metadata"], &meta) // best effort: only for messages
	h.name = meta.Name
	h.items = fields["items"]
	for _, f := range []struct {
		name string
		dst  *string
	}{{"kind", &h.kind}, {"apiVersion", &h.apiVersion}} {
		raw := bytes.TrimSpace(fields[f.name])
		if len(raw) == 0 || string(raw) == "null" {
			return fail(prefix+f.name, fmt.Sprintf("missing: every document needs apiVersion: %s and kind: one of %s",
				v1alpha1.GroupVersion, kinds))
		}
		if err := json.Unmarshal(raw, f.dst); err != nil {
			return fail(prefix+f.name, "must be a string, not "+jsonKind(raw))
		}
		if *f.dst == "" {
			return fail(prefix+f.name, "must not be empty")
		}
	}
	return h, true
}

func kindWord(v any) string {
	switch v.(type) {
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	}
	return "null"
}

func jsonKind(raw []byte) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "invalid JSON"
	}
	return withArticle(kindWord(v))
}

func withArticle(kind string) string {
	switch kind {
	case "array", "object":
		return "an " + kind
	case "bool":
		return "a boolean"
	case "null":
		return "null"
	}
	return "a " + kind
}
