package decisionlog

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/engine/request"
)

// Redacted stands in the decision log for a value --redact hides.
const Redacted = "[REDACTED]"

// fieldSelector decides which parts of a request reach the decision log.
// Tool inputs carry commands, file contents and credentials, so by default
// (nil selector) none of the request is logged beyond the fixed fields.
// Paths are the engine's (request.ParsePath), so --log-fields args.0 names
// exactly what a policy condition on args.0 sees.
type fieldSelector struct {
	all    bool
	paths  []request.Path
	redact []redactPath
}

// redactPath is a --redact path; every=true (a last segment of *) redacts
// every child of the node the path names.
type redactPath struct {
	path  request.Path
	every bool
}

// newFieldSelector builds a selector from flags Options.validate has
// checked; a path that does not parse is left out.
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
		if path, err := request.ParsePath(p); err == nil {
			f.paths = append(f.paths, path)
		}
	}
	for _, p := range redact {
		if r, err := parseRedactPath(p); err == nil {
			f.redact = append(f.redact, r)
		}
	}
	return f
}

// CheckField checks a --log-fields value: * alone, or an engine path.
func CheckField(p string) error {
	if p == "*" {
		return nil
	}
	path, err := request.ParsePath(p)
	if err != nil {
		return err
	}
	for _, seg := range path {
		if seg.Key == "*" {
			return fmt.Errorf("%q: * selects the whole request and must stand alone", p)
		}
	}
	return nil
}

// parseRedactPath reads a --redact value: an engine path, optionally ending
// in .* (every child).
func parseRedactPath(p string) (redactPath, error) {
	if p == "*" {
		return redactPath{}, fmt.Errorf("%q would redact the whole request; leave --log-fields empty instead", p)
	}
	prefix, every := strings.CutSuffix(p, ".*")
	path, err := request.ParsePath(prefix)
	if err != nil {
		return redactPath{}, err
	}
	for _, seg := range path {
		if seg.Key == "*" {
			return redactPath{}, fmt.Errorf("%q: * may only be the last segment", p)
		}
	}
	return redactPath{path: path, every: every}, nil
}

// project returns the logged view of req. (engine.Request is converted to
// map[string]any first: the path walk switches on that type.) It never
// modifies req: the request may be read by several sinks at once, so every
// change copies the containers along its path.
func (f *fieldSelector) project(req engine.Request) map[string]any {
	out := map[string]any(req)
	if !f.all {
		out = map[string]any{}
		for _, p := range f.paths {
			if v, ok := p.Resolve(map[string]any(req)); ok {
				out = withValue(out, p, v).(map[string]any)
			}
		}
	}
	for _, r := range f.redact {
		out = redact(out, r.path, r.every).(map[string]any)
	}
	return out
}

// redact returns node with the value at path replaced by Redacted, or with
// each of its children replaced when every is set.
func redact(node any, path request.Path, every bool) any {
	if len(path) == 0 {
		if !every {
			return Redacted
		}
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
	child, ok := path[0].Step(node)
	if !ok {
		return node
	}
	return withValue(node, path[:1], redact(child, path[1:], every))
}

// withValue returns node with v at path, copying every container it
// changes.
func withValue(node any, path request.Path, v any) any {
	if len(path) == 0 {
		return v
	}
	seg := path[0]
	switch n := node.(type) {
	case map[string]any:
		c := maps.Clone(n)
		c[seg.Key] = withValue(n[seg.Key], path[1:], v)
		return c
	case []any:
		if seg.Index >= 0 && seg.Index < len(n) {
			c := slices.Clone(n)
			c[seg.Index] = withValue(n[seg.Index], path[1:], v)
			return c
		}
	}
	return map[string]any{seg.Key: withValue(nil, path[1:], v)}
}

// CheckRedact checks a --redact value.
func CheckRedact(p string) error {
	_, err := parseRedactPath(p)
	return err
}
