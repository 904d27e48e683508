package pin

import (
	"errors"
	"fmt"

	"sigs.k8s.io/yaml"
)

// maxFileBytes bounds a pins file.
const maxFileBytes = 1 << 20

// pinsFile is what a pins file may hold: `toolgate mcp pin`'s output
// (pinnedTools, and pinning when given), or an MCPUpstream manifest,
// whose spec holds the same.
type pinsFile struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec *struct {
		PinnedTools map[string]string `json:"pinnedTools"`
		Pinning     string            `json:"pinning"`
	} `json:"spec"`
	PinnedTools map[string]string `json:"pinnedTools"`
	Pinning     string            `json:"pinning"`
}

// ParseFile reads a pins file (YAML or JSON): `toolgate mcp pin`'s output,
// a document with pinnedTools and, optionally, pinning; or an MCPUpstream
// manifest, whose name is returned (named) to be checked against the
// server it is for. Pinning is strict unless the file says warn. The set
// is checked (Set.Check).
func ParseFile(doc []byte) (set *Set, named string, err error) {
	if len(doc) > maxFileBytes {
		return nil, "", fmt.Errorf("more than %d bytes", maxFileBytes)
	}
	var f pinsFile
	if err := yaml.Unmarshal(doc, &f); err != nil {
		return nil, "", fmt.Errorf("not YAML or JSON: %w", err)
	}
	set = &Set{Tools: f.PinnedTools, Mode: f.Pinning}
	switch {
	case f.Kind == "MCPUpstream":
		if f.Spec == nil || f.PinnedTools != nil {
			return nil, "", errors.New("an MCPUpstream's pins go in spec.pinnedTools")
		}
		set = &Set{Tools: f.Spec.PinnedTools, Mode: f.Spec.Pinning}
		named = f.Metadata.Name
	case f.Kind != "":
		return nil, "", fmt.Errorf("kind %q: want an MCPUpstream, or the pinnedTools map toolgate mcp pin prints", f.Kind)
	case f.PinnedTools == nil:
		return nil, "", errors.New("no pinnedTools: want the pinnedTools map toolgate mcp pin prints, or an MCPUpstream manifest")
	}
	if set.Mode == "" {
		set.Mode = Strict
	}
	if err := set.Check(); err != nil {
		return nil, "", err
	}
	return set, named, nil
}
