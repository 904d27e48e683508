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
	out, changed := keepTools(msg, top, func(t json.RawMessage) bool { return !ps.observe(t) })
	if !changed {
		return msg
	}
	return append(out, '\n')
}

// keepTools is msg (decoded as top, an answer) with only the tools of its
// result's tools list that keep keeps, each tool seen once in list order;
// msg itself (changed false) when its result holds no tools list or keep
// kept them all.
// The one rewrite of a tools/list answer, for the HTTP proxy and the
// stdio guard.
func keepTools(msg []byte, top map[string]json.RawMessage, keep func(json.RawMessage) bool) (out []byte, changed bool) {
	var result map[string]json.RawMessage
	if json.Unmarshal(top["result"], &result) != nil {
		return msg, false
	}
	var tools []json.RawMessage
	if json.Unmarshal(result["tools"], &tools) != nil {
		return msg, false
	}
	kept := tools[:0:0]
	for _, t := range tools {
		if keep(t) {
			kept = append(kept, t)
		}
	}
	if len(kept) == len(tools) {
		return msg, false
	}
	result["tools"], _ = json.Marshal(kept)
	top["result"], _ = json.Marshal(result)
	out, err := json.Marshal(top)
	if err != nil {
		return msg, false
	}
	return out, true
}
