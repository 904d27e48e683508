package main

import (
	"fmt"
	"net/url"
	"os"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// imageBOM is the image's SBOM: the image as metadata.component (a
// container named by its index digest, with its platforms), and per
// platform the binary's SBOM, from cyclonedx-gomod, as a component with its
// modules nested. The binaries' bom-refs are prefixed with their platform:
// both list the same modules, and a BOM's refs must be unique.
func imageBOM(ref, digest string, platforms []platformFlag) (*cdx.BOM, error) {
	repo, tag := ref, ""
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		repo, tag = ref[:i], ref[i+1:]
	}
	name := repo[strings.LastIndex(repo, "/")+1:]
	q := url.Values{"repository_url": {repo}}
	if tag != "" {
		q.Set("tag", tag)
	}
	image := cdx.Component{
		BOMRef:     "image",
		Type:       cdx.ComponentTypeContainer,
		Name:       ref,
		Version:    digest,
		PackageURL: "pkg:oci/" + name + "@" + url.PathEscape(digest) + "?" + q.Encode(),
		Hashes:     &[]cdx.Hash{{Algorithm: cdx.HashAlgoSHA256, Value: strings.TrimPrefix(digest, "sha256:")}},
	}
	var props []cdx.Property
	var components []cdx.Component
	var deps []cdx.Dependency
	var binaries []string
	tools := []cdx.Component{{
		Type: cdx.ComponentTypeApplication, Name: "toolgate hack/sbom",
		Description: "the image's SBOM from cyclonedx-gomod's binary SBOMs, with github.com/CycloneDX/cyclonedx-go",
	}}
	seenTool := map[string]bool{}
	for _, p := range platforms {
		props = append(props, cdx.Property{Name: "oci:platform", Value: p.platform})
		bin, err := read(p.sbom)
		if err != nil {
			return nil, err
		}
		if bin.Metadata == nil || bin.Metadata.Component == nil {
			return nil, fmt.Errorf("%s: no metadata.component (the binary)", p.sbom)
		}
		for _, c := range toolComponents(bin.Metadata.Tools) {
			if !seenTool[c.Name+"@"+c.Version] {
				seenTool[c.Name+"@"+c.Version] = true
				tools = append(tools, c)
			}
		}
		prefix := p.platform + "/"
		c := *bin.Metadata.Component
		c.BOMRef = prefix + c.BOMRef
		c.Properties = &[]cdx.Property{{Name: "oci:platform", Value: p.platform}, {Name: "oci:manifest-digest", Value: p.digest}}
		if bin.Components != nil {
			modules := make([]cdx.Component, len(*bin.Components))
			for i, m := range *bin.Components {
				m.BOMRef = prefix + m.BOMRef
				modules[i] = m
			}
			c.Components = &modules
		}
		components = append(components, c)
		binaries = append(binaries, c.BOMRef)
		if bin.Dependencies != nil {
			for _, d := range *bin.Dependencies {
				d.Ref = prefix + d.Ref
				if d.Dependencies != nil {
					on := make([]string, len(*d.Dependencies))
					for i, r := range *d.Dependencies {
						on[i] = prefix + r
					}
					d.Dependencies = &on
				}
				deps = append(deps, d)
			}
		}
	}
	image.Properties = &props
	deps = append([]cdx.Dependency{{Ref: image.BOMRef, Dependencies: &binaries}}, deps...)
	bom := cdx.NewBOM()
	bom.Metadata = &cdx.Metadata{
		Component: &image,
		Tools:     &cdx.ToolsChoice{Components: &tools},
	}
	bom.Components = &components
	bom.Dependencies = &deps
	return bom, nil
}

// toolComponents are the tools a BOM names, as components: cyclonedx-gomod
// v1.10.0 writes the legacy tools array, CycloneDX 1.5+ prefers components.
func toolComponents(t *cdx.ToolsChoice) []cdx.Component {
	if t == nil {
		return nil
	}
	var out []cdx.Component
	if t.Components != nil {
		out = append(out, *t.Components...)
	}
	if t.Tools != nil {
		for _, tool := range *t.Tools {
			out = append(out, cdx.Component{Type: cdx.ComponentTypeApplication, Group: tool.Vendor, Name: tool.Name, Version: tool.Version,
				Hashes: tool.Hashes, ExternalReferences: tool.ExternalReferences})
		}
	}
	return out
}

func read(path string) (*cdx.BOM, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var bom cdx.BOM
	if err := cdx.NewBOMDecoder(f, cdx.BOMFileFormatJSON).Decode(&bom); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &bom, nil
}
