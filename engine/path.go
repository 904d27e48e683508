package engine

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

// segment is one step of a path: a key, and the array index it also denotes
// when it is a decimal number.
type segment struct {
	key   string
	index int // -1 when key is not a decimal index
}

type fieldPath []segment

func parsePath(p string) (fieldPath, error) {
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
	path := make(fieldPath, len(parts))
	for i, part := range parts {
		if part == "" {
			return nil, fmt.Errorf("field %q has an empty segment at position %d", p, i)
		}
		if forbiddenSegments[part] {
			return nil, fmt.Errorf("field %q uses the forbidden segment %q", p, part)
		}
		path[i] = segment{key: part, index: arrayIndex(part)}
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

// resolve walks the path through decoded JSON; an absent component gives
// present=false. A present null is present.
func (p fieldPath) resolve(root map[string]any) (any, bool) {
	var cur any = root
	for _, seg := range p {
		switch node := cur.(type) {
		case map[string]any:
			v, ok := node[seg.key]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			if seg.index < 0 || seg.index >= len(node) {
				return nil, false
			}
			cur = node[seg.index]
		default:
			return nil, false
		}
	}
	return cur, true
}
