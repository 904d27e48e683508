// Package pin is the one home of a pinned tool definition: its canonical
// JSON and digest (what `toolgate mcp pin` prints, what an MCPUpstream's
// spec.pinnedTools holds and what the MCP proxy and the stdio guard
// compare), and what a set of pins says about a tool. It is pure: no I/O.
package pin

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/toolgate/toolgate/engine"
)

// Code is the code of a call denied because its tool's definition is not
// the one pinned (changed, or not pinned at all under strict pinning).
const Code engine.Code = "TOOL_DEFINITION_CHANGED"

// Modes of a set of pins: what a drift does.
const (
	// Strict hides a tool without a pin and denies its calls.
	Strict = "strict"
	// Warn shows a tool without a pin and only reports it. A pinned tool
	// whose definition changed is hidden under both.
	Warn = "warn"
)

// MaxTools bounds the pins of one upstream (an MCPUpstream's MaxProperties).
const MaxTools = 512

// MaxToolNameLength is the longest tool name MCP allows.
const MaxToolNameLength = 128

// Fields are the members of a tool definition a digest covers, in the
// order the docs list them; the canonical document orders them by key.
var Fields = []string{"name", "description", "inputSchema", "annotations"}

var (
	toolName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
	digestRE = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// ValidToolName tells whether name is a tool name MCP allows: 1 to 128 of
// A-Z, a-z, 0-9, '_', '-' and '.'.
func ValidToolName(name string) bool { return toolName.MatchString(name) }

// ValidDigest tells whether d is a digest as Digest writes it: 64
// lower-case hex digits.
func ValidDigest(d string) bool { return digestRE.MatchString(d) }

// Canonical is the canonical JSON of a tool definition (one element of a
// tools/list result's tools) and the tool's name: an object holding the
// definition's name, description, inputSchema and annotations, each
// decoded by encoding/json (numbers as float64) and written back by it:
// object keys sorted, no insignificant whitespace, strings escaped as
// encoding/json escapes them. A member that is absent or null is left
// out; every other member of the definition (title, outputSchema, _meta,
// ...) is not covered.
func Canonical(tool []byte) (name string, doc []byte, err error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(tool, &members); err != nil {
		return "", nil, fmt.Errorf("a tool definition must be a JSON object: %w", err)
	}
	if members == nil {
		return "", nil, errors.New("a tool definition must be a JSON object, not null")
	}
	if err := json.Unmarshal(members["name"], &name); err != nil || name == "" {
		return "", nil, errors.New("a tool definition must have a non-empty string name")
	}
	covered := map[string]any{}
	for _, f := range Fields {
		raw, ok := members[f]
		if !ok || string(raw) == "null" {
			continue
		}
		var v any
		if err := json.Unmarshal(raw, &v); err != nil {
			return "", nil, fmt.Errorf("tool %q: %s: %w", name, f, err)
		}
		covered[f] = v
	}
	doc, err = json.Marshal(covered)
	if err != nil {
		return "", nil, fmt.Errorf("tool %q: %w", name, err)
	}
	return name, doc, nil
}

// Digest is the tool's name and the sha256 of its Canonical JSON, as 64
// lower-case hex digits.
func Digest(tool []byte) (name, digest string, err error) {
	name, doc, err := Canonical(tool)
	if err != nil {
		return "", "", err
	}
	return name, sum(doc), nil
}

// Set is one upstream's pins: its mode and each pinned tool's digest.
type Set struct {
	// Mode is Strict or Warn.
	Mode string
	// Tools maps a tool name to its pinned digest.
	Tools map[string]string
}

// Check checks the set: a mode, 1 to MaxTools pins, each a valid tool
// name and digest. All problems at once, each naming its tool.
func (s *Set) Check() error {
	var errs []error
	if s.Mode != Strict && s.Mode != Warn {
		errs = append(errs, fmt.Errorf("pinning %q is neither %s nor %s", s.Mode, Strict, Warn))
	}
	switch n := len(s.Tools); {
	case n == 0:
		errs = append(errs, errors.New("no tool is pinned"))
	case n > MaxTools:
		errs = append(errs, fmt.Errorf("%d tools are pinned, more than %d", n, MaxTools))
	}
	for _, name := range slices.Sorted(maps.Keys(s.Tools)) {
		if !ValidToolName(name) {
			errs = append(errs, fmt.Errorf("pinned tool %q: a tool name is 1-%d of A-Z, a-z, 0-9, '_', '-' or '.'", name, MaxToolNameLength))
		}
		if d := s.Tools[name]; !ValidDigest(d) {
			errs = append(errs, fmt.Errorf("pinned tool %q: digest %q is not 64 lower-case hex digits (toolgate mcp pin prints them)", name, d))
		}
	}
	return errors.Join(errs...)
}

// Drift is how a tool differs from its set's pins.
type Drift string

const (
	// None: the tool is pinned and its definition is the pinned one.
	None Drift = ""
	// Changed: the tool is pinned and its definition is not the pinned one.
	Changed Drift = "changed"
	// Unpinned: the tool has no pin.
	Unpinned Drift = "unpinned"
)

// DriftOf is how a tool whose definition has digest differs from the
// pins. An empty digest (the definition is unknown) is a change for a
// pinned tool.
func (s *Set) DriftOf(name, digest string) Drift {
	pinned, ok := s.Tools[name]
	switch {
	case !ok:
		return Unpinned
	case digest == "" || digest != pinned:
		return Changed
	}
	return None
}

// Hides tells whether a drift hides the tool and denies its calls: a
// pinned tool whose definition changed always (its pin says what was
// reviewed, and this is not it), a tool without a pin under Strict only:
// Warn lets an upstream add tools while still holding the pinned ones to
// their review.
func (s *Set) Hides(d Drift) bool { return d == Changed || (d == Unpinned && s.Mode != Warn) }

// Reason is what a denied call is told: the tool, the upstream and how it
// drifted.
func Reason(upstream, tool string, d Drift) string {
	if d == Unpinned {
		return fmt.Sprintf("tool %q of MCP upstream %q is not pinned (spec.pinnedTools) and pinning is strict; it is hidden and not called", tool, upstream)
	}
	return fmt.Sprintf("the definition of tool %q of MCP upstream %q is not the one pinned (spec.pinnedTools); it is hidden and not called until it is reviewed and pinned again", tool, upstream)
}

// Unknown is what a denied call is told when the tool's definition could
// not be seen at all (the upstream did not list it).
func Unknown(upstream, tool string) string {
	return fmt.Sprintf("tool %q of MCP upstream %q was not in its tools/list, so its definition cannot be checked against its pin; not called", tool, upstream)
}

// Describe is a one-line summary of a set for logs.
func (s *Set) Describe() string {
	return fmt.Sprintf("%d pinned tools (%s): %s", len(s.Tools), s.Mode, strings.Join(slices.Sorted(maps.Keys(s.Tools)), ", "))
}

func sum(doc []byte) string {
	h := sha256.Sum256(doc)
	return hex.EncodeToString(h[:])
}
