// Command image writes the toolgate image as an OCI image layout archive,
// without a Docker engine: the binary built as the Dockerfile's build stage
// builds it, in the Dockerfile's final stage (entrypoint /toolgate, user
// 65532, no shell). Load it with `ctr -n k8s.io images import`, `kind load
// image-archive`, or push it with `crane push` / `skopeo copy oci-archive:`.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/toolgate/toolgate/internal/ociimage"
)

func main() {
	out := flag.String("o", "bin/toolgate-image.tar", "archive to write")
	ref := flag.String("ref", "toolgate.local/toolgate:dev", "image name recorded in the archive")
	version := flag.String("version", "dev", "version stamped into the binary")
	commit := flag.String("commit", "unknown", "commit stamped into the binary")
	flag.Parse()
	if err := run(*out, *ref, *version, *commit); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(out, ref, version, commit string) error {
	tmp, err := os.MkdirTemp("", "toolgate-image-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "toolgate")
	if err := ociimage.BuildToolgate(".", bin, version, commit); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		return err
	}
	digest, err := ociimage.Write(out, ociimage.Toolgate(ref, bin))
	if err != nil {
		return err
	}
	fmt.Printf("%s: %s (manifest %s)\n", out, ref, digest)
	return nil
}
