// Command sbom writes the release's CycloneDX SBOMs. Binaries get theirs
// from cyclonedx-gomod (pinned by this module's tool directive: `go tool
// cyclonedx-gomod bin`), which reads the Go modules the toolchain recorded
// in the binary. `sbom image` composes the image's from those with the
// CycloneDX library: the image (its index digest, tag and platforms) is the
// BOM's subject, and each platform's binary, with its modules, a component.
//
// This is a module of its own so the generator's dependencies stay out of
// toolgate's go.mod.
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	cdx "github.com/CycloneDX/cyclonedx-go"
)

// platformFlag is one -platform os/arch=manifest-digest=binary-sbom.
type platformFlag struct{ platform, digest, sbom string }

type platformFlags []platformFlag

func (p *platformFlags) String() string { return fmt.Sprint(*p) }

func (p *platformFlags) Set(v string) error {
	parts := strings.Split(v, "=")
	if len(parts) != 3 || !strings.Contains(parts[0], "/") || !strings.HasPrefix(parts[1], "sha256:") {
		return fmt.Errorf("want os/arch=sha256:manifest-digest=binary.cdx.json, got %q", v)
	}
	*p = append(*p, platformFlag{parts[0], parts[1], parts[2]})
	return nil
}

func main() {
	if len(os.Args) < 2 || os.Args[1] != "image" {
		fmt.Fprintln(os.Stderr, "usage: sbom image -ref REPO:TAG -digest sha256:... -platform os/arch=sha256:...=binary.cdx.json... -o out.cdx.json")
		os.Exit(2)
	}
	fs := flag.NewFlagSet("sbom image", flag.ExitOnError)
	ref := fs.String("ref", "", "the image's name, repository:tag")
	digest := fs.String("digest", "", "the image index's digest")
	out := fs.String("o", "", "file to write")
	var platforms platformFlags
	fs.Var(&platforms, "platform", "os/arch=sha256:manifest-digest=binary.cdx.json, once per platform")
	_ = fs.Parse(os.Args[2:])
	if *ref == "" || !strings.HasPrefix(*digest, "sha256:") || *out == "" || len(platforms) == 0 {
		fmt.Fprintln(os.Stderr, "sbom image: -ref, -digest sha256:..., -o and at least one -platform are required")
		os.Exit(2)
	}
	bom, err := imageBOM(*ref, *digest, platforms)
	if err == nil {
		err = write(*out, bom)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sbom image:", err)
		os.Exit(1)
	}
}

func write(path string, bom *cdx.BOM) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := cdx.NewBOMEncoder(f, cdx.BOMFileFormatJSON).SetPretty(true).EncodeVersion(bom, cdx.SpecVersion1_6); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
