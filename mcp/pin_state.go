package mcp

import (
	"encoding/json"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/mcp/pin"
)

// Pinned tool definitions (docs/pinning.md). An upstream with pins in the
// bundle (engine.UpstreamPins, by its name) has every tools/list answer
// the proxy relays, and every one it makes itself, checked tool by tool:
// the digest of each definition listed is remembered, and a drifted tool
// is hidden from the list and its calls denied TOOL_DEFINITION_CHANGED when
// its definition changed, and when it has no pin under strict pinning
// (warn only reports those).
// A call to a tool whose definition the proxy has not seen yet (the
// client listed before the sidecar started, or never) makes the proxy list
// the upstream's tools itself first, as for a schema (params_learn.go);
// a tool the upstream does not list then cannot be checked and is denied
// (fail closed). The stdio guard keeps one pinState for its server.

// maxPinnedSeen bounds the digests remembered per upstream: past it they
// are forgotten, and a pinned tool's next call lists the tools again.
const maxPinnedSeen = 4096

// maxDriftReported bounds the drifts remembered as reported: past it they
// are forgotten, and each is reported once more.
const maxDriftReported = 4096

// pinState is one upstream's pins and what its lists showed.
type pinState struct {
	upstream string
	// set is the bundle's pins for the upstream; nil: none, nothing is
	// checked.
	set atomic.Pointer[pin.Set]

	mu sync.Mutex
	// seen maps each tool listed to its definition's digest ("" for a
	// definition that has none: it is not a JSON object with a name).
	seen map[string]string
	// reported are the drifts told (kind, tool, digest), so each is told
	// once however often it is listed.
	reported map[driftKey]bool
	report   *driftReport
}

type driftKey struct {
	kind         pin.Drift
	tool, digest string
}

// driftReport is where drifts go: a log line, a counter, and the
// DriftRecorder (an Event on the MCPUpstream) when one is set.
type driftReport struct {
	log     *slog.Logger
	counter *prometheus.CounterVec // nil: not counted (the stdio guard)
	// recorder is the proxy's DriftRecorder, nil when none is set.
	recorder atomic.Pointer[DriftRecorder]

	// labelled are the tools counted under their own name, per upstream:
	// the names come from the upstream, so past maxDriftTools a drift is
	// counted as tool="(other)" rather than grow the metric without bound.
	mu       sync.Mutex
	labelled map[string]map[string]bool
}

// maxDriftTools bounds the tool label values of one upstream's drifts.
const maxDriftTools = 256

// otherTool is the tool label of drifts past maxDriftTools.
const otherTool = "(other)"

// Drift is one drift reported: a tool listed by an upstream whose
// definition is not its pin.
type Drift struct {
	Upstream, Tool string
	// Kind is changed or unpinned.
	Kind pin.Drift
	// Digest is the listed definition's digest; Pinned the pin, "" for
	// an unpinned tool.
	Digest, Pinned string
	// Pinning is strict (the tool is hidden and its calls denied) or warn.
	Pinning string
	// Message says all of it in a sentence.
	Message string
}

// DriftRecorder is told each drift once (the sidecar makes it an Event on
// the MCPUpstream). It must not block: the list waits for it.
type DriftRecorder interface {
	ToolDrifted(Drift)
}

// newDriftCounter is toolgate_sidecar_mcp_tool_drift_total.
func newDriftCounter(reg prometheus.Registerer) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: metricPrefix + "mcp_tool_drift_total",
		Help: "Tools an MCP upstream with pinned tool definitions listed drifted from their pins, by upstream, tool and kind (changed: the definition's digest is not its pin; unpinned: no pin), counted once per tool and definition however often listed.",
	}, []string{"upstream", "tool", "kind"})
	reg.MustRegister(c)
	return c
}

// load sets the upstream's pins from a bundle; it tells whether what is
// hidden may have changed (the pins did).
func (ps *pinState) load(b *engine.Bundle) bool {
	var next *pin.Set
	if up := b.PinsFor(ps.upstream); up != nil {
		next = &pin.Set{Mode: up.Pinning, Tools: up.Tools}
		if err := next.Check(); err != nil {
			// A bundle is signed and its pins were checked when it was
			// built; one that is wrong all the same hides every tool
			// rather than none.
			ps.report.log.Error("the bundle's pins for this MCP upstream are malformed: every tool is hidden and denied", "upstream", ps.upstream, "err", err)
			next = &pin.Set{Mode: pin.Strict, Tools: map[string]string{}}
		}
	}
	prev := ps.set.Swap(next)
	return !samePins(prev, next)
}

func samePins(a, b *pin.Set) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Mode == b.Mode && maps.Equal(a.Tools, b.Tools)
}

// active tells whether the upstream has pins.
func (ps *pinState) active() bool { return ps.set.Load() != nil }

// known tells whether a call to tool can be checked without listing the
// tools first: the upstream has no pins, or the tool's definition was seen.
func (ps *pinState) known(tool string) bool {
	if !ps.active() {
		return true
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	_, ok := ps.seen[tool]
	return ok
}

// observe remembers the digest of one tool definition listed and tells
// whether it is hidden; a drift is reported (once).
func (ps *pinState) observe(tool json.RawMessage) (hide bool) {
	set := ps.set.Load()
	if set == nil {
		return false
	}
	name, digest, err := pin.Digest(tool)
	if err != nil {
		// Nameless or not an object: no call can name it, and nothing
		// unreadable is shown under strict pins.
		return set.Mode == pin.Strict
	}
	drift := set.DriftOf(name, digest)
	ps.mu.Lock()
	if ps.seen == nil || len(ps.seen) >= maxPinnedSeen {
		ps.seen = map[string]string{}
	}
	ps.seen[name] = digest
	first := false
	if drift != pin.None {
		k := driftKey{drift, name, digest}
		if ps.reported == nil || len(ps.reported) >= maxDriftReported {
			ps.reported = map[driftKey]bool{}
		}
		first = !ps.reported[k]
		ps.reported[k] = true
	}
	ps.mu.Unlock()
	if first {
		ps.report.drifted(Drift{Upstream: ps.upstream, Tool: name, Kind: drift, Digest: digest, Pinned: set.Tools[name],
			Pinning: set.Mode, Message: driftMessage(ps.upstream, name, drift, set.Mode)})
	}
	return set.Hides(drift)
}

// driftMessage is a drift as the log, the Event and the docs say it.
func driftMessage(upstream, tool string, d pin.Drift, mode string) string {
	what := "hidden from tools/list and its calls denied " + string(pin.Code)
	if mode == pin.Warn && d == pin.Unpinned {
		what = "not hidden (pinning: warn)"
	}
	if d == pin.Unpinned {
		return "MCP upstream " + upstream + " lists tool " + tool + ", which spec.pinnedTools does not pin: " + what
	}
	return "MCP upstream " + upstream + " lists tool " + tool + " with a definition that is not the one pinned: " + what
}

func (r *driftReport) drifted(d Drift) {
	r.log.Warn("MCP tool definition drifted from its pin", "upstream", d.Upstream, "tool", d.Tool, "kind", string(d.Kind),
		"digest", d.Digest, "pinned", d.Pinned, "pinning", d.Pinning)
	if r.counter != nil {
		r.counter.WithLabelValues(d.Upstream, r.toolLabel(d.Upstream, d.Tool), string(d.Kind)).Inc()
	}
	if rec := r.recorder.Load(); rec != nil {
		(*rec).ToolDrifted(d)
	}
}

// toolLabel is the tool label a drift is counted under.
func (r *driftReport) toolLabel(upstream, tool string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.labelled == nil {
		r.labelled = map[string]map[string]bool{}
	}
	tools := r.labelled[upstream]
	if tools == nil {
		tools = map[string]bool{}
		r.labelled[upstream] = tools
	}
	if !tools[tool] && len(tools) >= maxDriftTools {
		return otherTool
	}
	tools[tool] = true
	return tool
}

// denyCall is the deny of a call to tool when its definition changed, or
// it has no pin and the pins are strict; false lets the call be decided as any other.
func (ps *pinState) denyCall(tool string) (engine.Result, bool) {
	set := ps.set.Load()
	if set == nil {
		return engine.Result{}, false
	}
	ps.mu.Lock()
	digest, seen := ps.seen[tool]
	ps.mu.Unlock()
	drift := set.DriftOf(tool, digest)
	if !set.Hides(drift) {
		return engine.Result{}, false
	}
	reason := pin.Reason(ps.upstream, tool, drift)
	if !seen && drift == pin.Changed {
		reason = pin.Unknown(ps.upstream, tool)
	}
	return decide.SelfDeny(pin.Code, reason), true
}

// loadPins sets every route's pins from a new bundle; it tells whether
// any changed, so open list streams are told to list again.
func (p *Proxy) loadPins(b *engine.Bundle) bool {
	changed := false
	for _, rt := range p.routes {
		if rt.pins.load(b) {
			changed = true
		}
	}
	return changed
}

// SetDriftRecorder makes r told of each drift of a pinned upstream's tools
// (the sidecar's Events on the MCPUpstream).
func (p *Proxy) SetDriftRecorder(r DriftRecorder) {
	p.drift.recorder.Store(&r)
}
