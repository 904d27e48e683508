package decisionlog

import (
	"encoding/json"
	"unicode/utf8"

	"github.com/toolgate/toolgate/engine"
)

// Preview is what a person deciding on a call is shown of it: its
// arguments (input, args and kwargs, those present) with every --redact
// path hidden as the decision log hides it, as JSON cut to at most max
// bytes on a character boundary (the cut marked with "…"). The approver
// sees no more than the log would keep.
func (d *Log) Preview(req engine.Request, max int) string {
	args := map[string]any{}
	for _, k := range []string{engine.FieldInput, engine.FieldArgs, engine.FieldKwargs} {
		if v, ok := req[k]; ok {
			args[k] = v
		}
	}
	for _, r := range d.format.redact {
		args = redact(args, r.path, r.every).(map[string]any)
	}
	b, err := json.Marshal(args)
	if err != nil {
		return ""
	}
	return cut(string(b), max)
}

// cut shortens s to at most max bytes, on a character boundary, ending
// with "…" when cut.
func cut(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const mark = "…"
	n := max - len(mark)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	if n < 0 {
		return ""
	}
	return s[:n] + mark
}
