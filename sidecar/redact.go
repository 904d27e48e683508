package sidecar

import (
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/toolgate/toolgate/engine"
)

// Redacted stands in the decision log for a value --redact hides.
const Redacted = "[REDACTED]"

// fieldSelector decides which parts of a request reach the decision log.
// Tool inputs carry commands, file contents and credentials, so by default
// (nil selector) none of the request is logged beyond the fixed fields.
type fieldSelector struct {
	all    bool
	paths  [][]string
	redact [][]string // a last segment of * redacts every child
}

func newFieldSelector(fields, redact []string) *fieldSelector {
	if len(fields) == 0 {
		return nil
	}
	f := &fieldSelector{}
	for _, p := range fields {
		if p == "*" {
			f.all = true
			continue
		}
		f.paths = append(f.paths, strings.Split(p, "."))
	}
	for _, p := range redact {
		f.redact = append(f.redact, strings.Split(p, "."))
	}
	return f
}

// project returns the logged view of req. (engine.Request is converted to
// map[string]any first: the path walk switches on that type.) It never modifies req: the
// request may be read by several sinks at once, so every change copies the
// containers along its path.
func (f *fieldSelector) project(req engine.Request) map[string]any {
	out := map[string]any(req)
	if !f.all {
		out = map[string]any{}
		for _, p := range f.paths {
			if v, ok := lookup(map[string]any(req), p); ok {
				out = withValue(out, p, v).(map[string]any)
			}
		}
	}
	for _, p := range f.redact {
		out = redactPath(out, p).(map[string]any)
	}
	return out
}

func redactPath(node any, path []string) any {
	if len(path) == 1 && path[0] == "*" {
		switch n := node.(type) {
		case map[string]any:
			c := make(map[string]any, len(n))
			for k := range n {
				c[k] = Redacted
			}
			return c
		case []any:
			c := make([]any, len(n))
			for i := range c {
				c[i] = Redacted
			}
			return c
		}
		return node
	}
	child, ok := lookup(node, path[:1])
	if !ok {
		return node
	}
	if len(path) == 1 {
		return withValue(node, path, Redacted)
	}
	return withValue(node, path[:1], redactPath(child, path[1:]))
}

func lookup(node any, path []string) (any, bool) {
	for _, seg := range path {
		switch n := node.(type) {
		case map[string]any:
			v, ok := n[seg]
			if !ok {
				return nil, false
			}
			node = v
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(n) {
				return nil, false
			}
			node = n[i]
		default:
			return nil, false
		}
	}
	return node, true
}

// withValue returns node with v at path, copying every container it
// changes.
func withValue(node any, path []string, v any) any {
	if len(path) == 0 {
		return v
	}
	switch n := node.(type) {
	case map[string]any:
		c := maps.Clone(n)
		c[path[0]] = withValue(n[path[0]], path[1:], v)
		return c
	case []any:
		if i, err := strconv.Atoi(path[0]); err == nil && i >= 0 && i < len(n) {
			c := slices.Clone(n)
			c[i] = withValue(n[i], path[1:], v)
			return c
		}
	}
	return map[string]any{path[0]: withValue(nil, path[1:], v)}
}
