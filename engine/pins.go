package engine

import (
	"cmp"
	"maps"
	"slices"
)

// UpstreamPins are one MCPUpstream's pinned tool definitions: the MCP
// proxy (and the stdio guard) serving the upstream of that name hides a
// tool whose definition's digest is not its pin, and denies its calls
// TOOL_DEFINITION_CHANGED (package mcp/pin, which owns the digest).
//
// They are a bundle field of their own, not a member of Identity.Upstreams:
// a bundle's Identity being set is what registers the namespace's agents
// (a sidecar without an Agent then denies every call AGENT_UNREGISTERED),
// and pins must reach a sidecar whose upstreams are its own arguments
// (--mcp-upstream NAME=URL) just the same, in an operator's bundle or one
// built by `toolgate bundle -f` from an MCPUpstream manifest.
type UpstreamPins struct {
	// Upstream is the MCPUpstream's name: the NAME of --mcp-upstream.
	Upstream string `json:"upstream"`
	// Pinning is strict or warn, as applied (never empty).
	Pinning string `json:"pinning"`
	// Tools maps each pinned tool's name to the sha256 of its definition.
	Tools map[string]string `json:"tools"`
}

// PinsFor is the pins of the upstream named name, nil when it has none.
func (b *Bundle) PinsFor(name string) *UpstreamPins {
	for i := range b.Pins {
		if b.Pins[i].Upstream == name {
			return &b.Pins[i]
		}
	}
	return nil
}

// sortedPins is pins by upstream name, each with its own map, so equal
// bundles encode equally (maps encode with sorted keys).
func sortedPins(pins []UpstreamPins) []UpstreamPins {
	if len(pins) == 0 {
		return nil
	}
	out := slices.Clone(pins)
	for i := range out {
		out[i].Tools = maps.Clone(out[i].Tools)
	}
	slices.SortFunc(out, func(x, y UpstreamPins) int { return cmp.Compare(x.Upstream, y.Upstream) })
	return out
}
