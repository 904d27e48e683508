package mcp

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/toolgate/toolgate/engine"
)

// Argument keys by case. Go's encoding/json binds an object key to a
// struct field whose name equals it under Unicode simple case folding
// (strings.EqualFold: "Path" binds path, the Kelvin sign K binds k, the
// long s ſ binds s), and Go MCP servers bind a call's arguments into
// structs with it (mark3labs/mcp-go's typed handlers, BindArguments;
// handlers that json.Unmarshal their arguments). A deny on input.path
// does not see {"Path": "/secrets/x"}, which such a server runs as path.
// (The official Go SDK's typed tools match keys exactly since v1.x: its
// decoder is set DontMatchCaseInsensitiveStructFields.) So an argument key
// that is not a property of the tool's inputSchema, but equals one under
// folding, is refused, never forwarded. The schemas come from the
// tools/list answers the proxy and the stdio guard relay, and from their
// own listing when a call names a tool not seen yet (params_learn.go).
//
// Folding is engine.FoldKey, strings.EqualFold's relation: exactly what
// encoding/json matches since Go 1.21 (each rune folded to its simple
// folding orbit), and a superset of the older encoding/json's ASCII, K and
// ſ special cases. (encoding/json/v2's MatchCaseInsensitiveNames also
// ignores "_" and "-"; servers using it are not covered.)

// keySchema is what a schema says of the keys of the objects it
// describes: its properties, each with the schema below it, and the schema
// of its array items. $ref is not followed: a property behind one has its
// own keys unchecked.
type keySchema struct {
	props  map[string]*keySchema
	folded map[string]string // engine.FoldKey(property) -> property
	items  *keySchema
}

// maxKeySchemaNodes bounds the schemas kept for one tool.
const maxKeySchemaNodes = 4096

// newKeySchema reads the keys of schema (a JSON Schema); nil when it
// names none anywhere.
func newKeySchema(schema json.RawMessage) *keySchema {
	budget := maxKeySchemaNodes
	return readKeySchema(schema, 0, &budget)
}

func readKeySchema(schema json.RawMessage, depth int, budget *int) *keySchema {
	if depth > maxSchemaDepth || *budget <= 0 || len(schema) == 0 {
		return nil
	}
	*budget--
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
		Items      json.RawMessage            `json:"items"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	ks := &keySchema{items: readKeySchema(s.Items, depth+1, budget)}
	if len(s.Properties) > 0 {
		ks.props = make(map[string]*keySchema, len(s.Properties))
		ks.folded = make(map[string]string, len(s.Properties))
		for name, prop := range s.Properties {
			ks.props[name] = readKeySchema(prop, depth+1, budget)
			ks.folded[engine.FoldKey(name)] = name
		}
	}
	if ks.props == nil && ks.items == nil {
		return nil
	}
	return ks
}

// checkKeys refuses a key in v (a decoded JSON value) that is not a
// property of the schema describing it but folds to one; path is where v
// is, for the message.
func (ks *keySchema) checkKeys(v any, path string) error {
	if ks == nil {
		return nil
	}
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			if sub, ok := ks.props[k]; ok {
				if sub == nil {
					continue // nothing below it to check: no path built
				}
				if err := sub.checkKeys(child, path+"."+k); err != nil {
					return err
				}
				continue
			}
			if prop, ok := ks.folded[engine.FoldKey(k)]; ok {
				return fmt.Errorf("argument key %q (at %s) is not a property of the tool's input schema, but Go servers bind it to property %q, differing only in case; send %q", k, path, prop, prop)
			}
		}
	case []any:
		for i, el := range v {
			if err := ks.items.checkKeys(el, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

// hasKeys tells whether v holds an object key anywhere.
func hasKeys(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		return len(v) > 0
	case []any:
		for _, el := range v {
			if hasKeys(el) {
				return true
			}
		}
	}
	return false
}

// checkArgumentKeys refuses a call to tool whose arguments (input,
// decoded) hold a key that differs only in case from a property of the
// tool's input schema, and a call with any key to a tool whose schema is
// not known: its keys cannot be checked.
func (ps *paramSchemas) checkArgumentKeys(tool string, input any) error {
	v, seen := ps.tools.Load(tool)
	if !seen {
		if !hasKeys(input) {
			return nil
		}
		return fmt.Errorf("the upstream's tools/list does not list tool %q (or could not be read), so the case of its argument keys cannot be checked against its input schema", tool)
	}
	return v.(*toolSchema).keys.checkKeys(input, "arguments")
}

// needsSchema tells whether a call's raw arguments may hold a key, so
// that its tool's schema must be known: anything but absent, null, {} or
// [] (a cheap look; checkArgumentKeys decides on the decoded value).
func needsSchema(args json.RawMessage) bool {
	switch string(bytes.TrimSpace(args)) {
	case "", "null", "{}", "[]":
		return false
	}
	return true
}
