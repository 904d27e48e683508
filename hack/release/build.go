package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/toolgate/toolgate/internal/ociimage"
	"github.com/toolgate/toolgate/internal/testenv"
)

// platforms the binaries are built for; the image holds the linux ones.
var platforms = []struct{ os, arch string }{{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"}}

// buildBinaries builds toolgate_X.Y.Z_os_arch as the Dockerfile's build
// stage does (static, -trimpath, stamped with the tag and commit).
func buildBinaries(o options) error {
	for _, p := range platforms {
		if err := ociimage.BuildToolgateFor(o.root, o.artifact(p.os+"_"+p.arch), p.os, p.arch, o.tag, o.commit); err != nil {
			return err
		}
	}
	return nil
}

// sbomTool runs the SBOM module (hack/sbom, pinned generator) with args.
func sbomTool(o options, args ...string) error {
	cmd := exec.Command("go", append([]string{"-C", filepath.Join(o.root, "hack", "sbom")}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// binarySBOMs writes toolgate_X.Y.Z_os_arch.cdx.json for each binary:
// cyclonedx-gomod reads the modules the toolchain recorded in it. It takes
// the platform in its purls from GOOS and GOARCH, not from the binary, so
// it is built once for this machine and run with each binary's.
func binarySBOMs(o options) error {
	tmp, err := os.MkdirTemp("", "toolgate-sbom-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	tool := filepath.Join(tmp, "cyclonedx-gomod")
	if err := sbomTool(o, "build", "-o", tool, "github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod"); err != nil {
		return err
	}
	for _, p := range platforms {
		bin := o.artifact(p.os + "_" + p.arch)
		cmd := exec.Command(tool, "bin", "-json", "-noserial", "-notimestamp", "-version", o.tag, "-output", bin+".cdx.json", bin)
		cmd.Env = append(os.Environ(), "GOOS="+p.os, "GOARCH="+p.arch)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("cyclonedx-gomod bin %s: %w\n%s", filepath.Base(bin), err, out)
		}
	}
	return nil
}

// buildImage writes toolgate_X.Y.Z_image.oci.tar, the linux binaries in the
// Dockerfile's final stage under one name for both platforms, and its SBOM.
func buildImage(o options) error {
	ref := o.repo + ":" + o.version
	var images []ociimage.Image
	for _, p := range platforms {
		if p.os == "linux" {
			img := ociimage.Toolgate(ref, o.artifact(p.os+"_"+p.arch))
			img.Arch = p.arch
			images = append(images, img)
		}
	}
	archive := o.artifact("image.oci.tar")
	digest, err := ociimage.WriteIndex(archive, ref, images)
	if err != nil {
		return err
	}
	layout, err := ociimage.Read(archive)
	if err != nil {
		return err
	}
	args := []string{"run", ".", "image", "-ref", ref, "-digest", digest, "-o", o.artifact("image.cdx.json")}
	for _, p := range layout.Platforms {
		args = append(args, "-platform", p.OS+"/"+p.Arch+"="+p.Digest+"="+o.artifact(p.OS+"_"+p.Arch+".cdx.json"))
	}
	if err := sbomTool(o, args...); err != nil {
		return err
	}
	fmt.Printf("release: image %s@%s\n", ref, digest)
	return nil
}

// packageChart writes toolgate-X.Y.Z.tgz: version and appVersion X.Y.Z,
// so the chart's default image tag is the release's.
func packageChart(o options) error {
	helm, err := testenv.InstallHelm()
	if err != nil {
		return err
	}
	_, err = helm.Package(filepath.Join(o.root, "charts", "toolgate"), o.version, o.dist)
	return err
}

// runIn runs a command in dir, its output kept for the error.
func runIn(dir, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = os.Environ()
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}
