package mcp

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/toolgate/toolgate/mcp/jsonrpc"
)

// Mcp-Param-* headers (SEP-2243, MCP 2026-07-28): a client mirrors each
// argument that the tool's input schema marks with x-mcp-header into a
// header, so that gateways can route on it without reading the body.
// Whatever routes or authorizes on those headers behind the proxy must see
// the call that was decided. So the proxy checks every such header against
// the body, as the SDKs' servers do. Which argument a header mirrors is
// known only from the tool's schema: the proxy learns it from the
// tools/list answers it relays. A call that carries such a header for a
// tool whose schema it has not seen is refused, because the header cannot
// be checked.

const paramHeaderPrefix = "Mcp-Param-"

// paramBinding is one argument (a path of property names) mirrored in one
// header (canonical form).
type paramBinding struct {
	path   []string
	header string
}

// paramSchemas are what the proxy knows of each tool of one upstream, by
// tool name: its x-mcp-header bindings (none: seen, mirrors nothing) and
// the keys of its arguments (argkeys.go).
type paramSchemas struct {
	tools sync.Map // string -> *toolSchema
}

// toolSchema is what one tool's inputSchema says.
type toolSchema struct {
	bindings []paramBinding
	keys     *keySchema
}

// maxSchemaDepth bounds how deep x-mcp-header annotations are looked for.
const maxSchemaDepth = 32

// learn records the bindings of one tool of a tools/list answer.
func (ps *paramSchemas) learn(tool json.RawMessage) {
	var t struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}
	if json.Unmarshal(tool, &t) != nil || t.Name == "" {
		return
	}
	var bindings []paramBinding
	collectParamBindings(t.InputSchema, nil, &bindings)
	ps.tools.Store(t.Name, &toolSchema{bindings: bindings, keys: newKeySchema(t.InputSchema)})
}

func collectParamBindings(schema json.RawMessage, prefix []string, out *[]paramBinding) {
	if len(prefix) > maxSchemaDepth {
		return
	}
	var s struct {
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return
	}
	for name, prop := range s.Properties {
		path := append(slices.Clip(prefix), name)
		var p struct {
			Header string `json:"x-mcp-header"`
		}
		if json.Unmarshal(prop, &p) == nil && p.Header != "" {
			*out = append(*out, paramBinding{path: path, header: http.CanonicalHeaderKey(paramHeaderPrefix + p.Header)})
		}
		collectParamBindings(prop, path, out)
	}
}

// paramHeaderNames are the Mcp-Param-* headers of a request, sorted; nil
// (no allocation) when there are none, as on almost every call. Keys are
// canonical: the request parser made them so.
func paramHeaderNames(h http.Header) []string {
	var present []string
	for k := range h {
		if strings.HasPrefix(k, paramHeaderPrefix) {
			present = append(present, k)
		}
	}
	slices.Sort(present)
	return present
}

// check refuses a tools/call whose Mcp-Param-* headers (present, from
// paramHeaderNames) do not each mirror, exactly, an argument of the call
// that the tool's schema binds to it.
func (ps *paramSchemas) check(h http.Header, present []string, call *jsonrpc.ToolCall) error {
	if len(present) == 0 {
		return nil
	}
	v, seen := ps.tools.Load(*call.Name)
	if !seen {
		return fmt.Errorf("the call carries %s, but the upstream's tools/list does not list tool %q (or could not be read), so the header cannot be checked against the arguments", strings.Join(present, ", "), *call.Name)
	}
	bindings := v.(*toolSchema).bindings
	var args map[string]json.RawMessage
	if len(call.Arguments) > 0 && string(call.Arguments) != "null" {
		if err := json.Unmarshal(call.Arguments, &args); err != nil {
			return fmt.Errorf("the call carries %s, but its arguments are not an object", strings.Join(present, ", "))
		}
	}
	for _, name := range present {
		i := slices.IndexFunc(bindings, func(b paramBinding) bool { return b.header == name })
		if i < 0 {
			return fmt.Errorf("the %s header mirrors no argument of tool %q", name, *call.Name)
		}
		values := h.Values(name)
		if len(values) != 1 {
			return fmt.Errorf("the %s header may be given once", name)
		}
		arg, ok := lookupArgument(args, bindings[i].path)
		if !ok {
			return fmt.Errorf("the %s header is given for argument %q, which the call does not have", name, strings.Join(bindings[i].path, "."))
		}
		decoded, err := decodeHeaderName(values[0])
		if err != nil {
			return fmt.Errorf("the %s header: %w", name, err)
		}
		if !headerMirrors(decoded, arg) {
			return fmt.Errorf("the %s header %q does not match argument %q of the body; refused so the call decided is the call run", name, values[0], strings.Join(bindings[i].path, "."))
		}
	}
	return nil
}

// lookupArgument is the value at path in args; false when absent or null.
func lookupArgument(args map[string]json.RawMessage, path []string) (json.RawMessage, bool) {
	cur := args
	for i, name := range path {
		raw, ok := cur[name]
		if !ok || string(raw) == "null" {
			return nil, false
		}
		if i == len(path)-1 {
			return raw, true
		}
		cur = nil
		if json.Unmarshal(raw, &cur) != nil {
			return nil, false
		}
	}
	return nil, false
}

// headerMirrors compares a decoded header with the argument it mirrors as
// SEP-2243 does: a string exactly, a boolean as true/false, an integer by
// value (within JavaScript's safe range); any other value mirrors nothing.
func headerMirrors(header string, arg json.RawMessage) bool {
	var v any
	if json.Unmarshal(arg, &v) != nil {
		return false
	}
	switch v := v.(type) {
	case string:
		return header == v
	case bool:
		return header == strconv.FormatBool(v)
	case float64:
		const safe = 1<<53 - 1
		if v != math.Trunc(v) || math.Abs(v) > safe {
			return false
		}
		n, err := strconv.ParseFloat(header, 64)
		return err == nil && n == v
	}
	return false
}

// decodeHeaderName reads an Mcp-Name value, which a client base64-encodes
// as =?base64?...?= when the name is not plain ASCII.
func decodeHeaderName(v string) (string, error) {
	inner, ok := strings.CutPrefix(v, "=?base64?")
	if !ok {
		return v, nil
	}
	inner, ok = strings.CutSuffix(inner, "?=")
	if !ok {
		return v, nil
	}
	b, err := base64.StdEncoding.DecodeString(inner)
	if err != nil {
		return "", fmt.Errorf("Mcp-Name %q is not valid base64", v)
	}
	return string(b), nil
}
