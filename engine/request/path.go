package request

import (
	"fmt"
	"strconv"
	"strings"
)

// Limits on field paths: deep enough for real tool inputs, shallow enough that
// a path can never be a resource problem.
const (
	MaxPathSegments = 16
	MaxPathLength   = 256
)

// forbiddenSegments are rejected so that policies written for JavaScript
// evaluators cannot walk prototypes, and so no port of this engine can.
var forbiddenSegments = map[string]bool{"__proto__": true, "constructor": true, "prototype": true}

// ForbiddenSegment tells whether name is one of the prototype names no
// path, and no other key a policy names (select.context), may use.
func ForbiddenSegment(name string) bool { return forbiddenSegments[name] }

// Segment is one step of a path: a key, and the array index it also denotes
// when it is a decimal number.
type Segment struct {
	Key   string
	Index int // -1 when Key is not a decimal index
}

// Path is a parsed dot path ("input.args.0"). Everything that names a request
// field (conditions, the sidecar's --log-fields and --redact) parses it here,
// so a path means the same thing everywhere.
type Path []Segment

// ParsePath parses a dot path, refusing empty segments, prototype names and
// paths beyond MaxPathSegments or MaxPathLength.
func ParsePath(p string) (Path, error) {
	if p == "" {
		return nil, fmt.Errorf("field is empty")
	}
	if len(p) > MaxPathLength {
		return nil, fmt.Errorf("field is %d characters long, more than %d", len(p), MaxPathLength)
	}
	parts := strings.Split(p, ".")
	if len(parts) > MaxPathSegments {
		return nil, fmt.Errorf("field %q has %d segments, more than %d", p, len(parts), MaxPathSegments)
	}
	path := make(Path, len(parts))
	for i, part := range parts {
		if part == "" {
			return nil, fmt.Errorf("field %q has an empty segment at position %d", p, i)
		}
		if forbiddenSegments[part] {
			return nil, fmt.Errorf("field %q uses the forbidden segment %q", p, part)
		}
		path[i] = Segment{Key: part, Index: arrayIndex(part)}
	}
	return path, nil
}

// arrayIndex accepts plain decimal digits only ("0", "12"; not "+1", "01").
func arrayIndex(s string) int {
	if s == "" || len(s) > 9 || (len(s) > 1 && s[0] == '0') {
		return -1
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return -1
		}
	}
	n, _ := strconv.Atoi(s)
	return n
}

// Resolve walks the path through decoded JSON from root; an absent component
// gives present=false. A present null is present.
func (p Path) Resolve(root map[string]any) (any, bool) {
	var cur any = root
	for _, seg := range p {
		v, ok := seg.Step(cur)
		if !ok {
			return nil, false
		}
		cur = v
	}
	return cur, true
}

// Step returns the child of node this segment names: a key of an object, or
// an element of an array when the segment is a decimal index.
func (s Segment) Step(node any) (any, bool) {
	switch n := node.(type) {
	case map[string]any:
		v, ok := n[s.Key]
		return v, ok
	case []any:
		if s.Index < 0 || s.Index >= len(n) {
			return nil, false
		}
		return n[s.Index], true
	}
	return nil, false
}
