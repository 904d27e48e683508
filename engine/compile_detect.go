package engine

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/engine/detect"
	"github.com/toolgate/toolgate/engine/internal/jsonvalue"
	"github.com/toolgate/toolgate/engine/request"
)

// checkDetectOperand compiles a detect condition's detectors, named by
// value (one name) or values (a list), into one scanner.
func checkDetectOperand(_ *compiler, c *Condition, _ operatorSpec, cc *ccond, fail failFunc) {
	known := strings.Join(detect.Names(), ", ")
	raws, at := c.Values, At("values")
	if len(c.Value) > 0 {
		raws, at = []json.RawMessage{c.Value}, At("value")
	}
	if len(raws) == 0 {
		fail(At("value"), "operator detect needs a detector name (value) or a list of them (values): one of %s", known)
		return
	}
	names := make([]string, 0, len(raws))
	ok := true
	for i, raw := range raws {
		where := at
		if len(c.Value) == 0 {
			where = at.Index(i)
		}
		s, err := jsonvalue.ParseScalar(raw)
		if err != nil || s.Kind != jsonvalue.KindString {
			fail(where, "operator detect takes detector names (strings), not %s: the detectors are %s", strings.TrimSpace(string(raw)), known)
			ok = false
			continue
		}
		if _, found := detect.Lookup(s.Str); !found {
			fail(where, "unknown detector %q: the detectors are %s", jsonvalue.Truncate(s.Str, 64), known)
			ok = false
			continue
		}
		if slices.Contains(names, s.Str) {
			fail(where, "detector %q is named twice", s.Str)
			ok = false
			continue
		}
		names = append(names, s.Str)
	}
	if !ok {
		return
	}
	sc, err := detect.New(names...)
	if err != nil {
		fail(at, "%v", err)
		return
	}
	cc.scanner = sc
}

// outputAware wraps each test of output.text or output.structured in cc
// (a result rule's condition) in an opOutput node.
func (k *compiler) outputAware(cc ccond) ccond {
	switch cc.op {
	case opAny, opAll:
		for i := range cc.sub {
			cc.sub[i] = k.outputAware(cc.sub[i])
		}
		return cc
	}
	if !readsWholeOutput(k.paths[cc.slot]) {
		return cc
	}
	return ccond{op: opOutput, slot: cc.slot, sub: []ccond{cc}}
}

// readsWholeOutput tells whether p is output.text or output.structured or
// under it: what a truncated output cannot answer.
func readsWholeOutput(p request.Path) bool {
	return len(p) >= 2 && p[0].Key == FieldOutput && (p[1].Key == OutputText || p[1].Key == OutputStructured)
}
