package mcp

import (
	"encoding/json"
)

// filterPinned removes from a tools/list answer (one JSON-RPC message) the
// tools ps hides, remembering every definition's digest; any other message
// comes back unchanged. The stdio guard filters its server's answers with
// it; the HTTP proxy's filterMessage observes the same way among its
// other filters.
func filterPinned(msg []byte, ps *pinState) []byte {
	var top map[string]json.RawMessage
	if json.Unmarshal(msg, &top) != nil || top["result"] == nil {
		return msg
	}
	var result map[string]json.RawMessage
	if json.Unmarshal(top["result"], &result) != nil {
		return msg
	}
	var tools []json.RawMessage
	if json.Unmarshal(result["tools"], &tools) != nil {
		return msg
	}
	kept := tools[:0:0]
	for _, t := range tools {
		if !ps.observe(t) {
			kept = append(kept, t)
		}
	}
	if len(kept) == len(tools) {
		return msg
	}
	result["tools"], _ = json.Marshal(kept)
	top["result"], _ = json.Marshal(result)
	out, err := json.Marshal(top)
	if err != nil {
		return msg
	}
	return append(out, '\n')
}
