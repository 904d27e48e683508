package mcp

import (
	"strings"

	"github.com/toolgate/toolgate/engine"
)

// applyRedactions replaces each span of text (sorted, not overlapping)
// with its rule's mark. TEMPORARY: the engine's exported function (branch
// results) replaces it once merged.
func applyRedactions(text string, spans []engine.Redaction) string {
	var b strings.Builder
	at := 0
	for _, s := range spans {
		b.WriteString(text[at:s.Start])
		b.WriteString(engine.RedactionMark(s.RuleID))
		at = s.End
	}
	b.WriteString(text[at:])
	return b.String()
}
