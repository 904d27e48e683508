package testenv

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"strings"
	"testing"
)

// Untar reads a Rego bundle (a gzipped tar): its entries' names in order,
// and their contents by name, each name with trim cut from its front: "/"
// to look entries up as rego.PolicyFile and its siblings name them, "" to
// see the names as written.
func Untar(t testing.TB, doc []byte, trim string) (names []string, files map[string]string) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("the Rego bundle is not gzip: %v", err)
	}
	tr := tar.NewReader(zr)
	files = map[string]string{}
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return names, files
		}
		if err != nil {
			t.Fatalf("the Rego bundle is not a tar: %v", err)
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatalf("reading %s from the Rego bundle: %v", hdr.Name, err)
		}
		name := strings.TrimPrefix(hdr.Name, trim)
		names = append(names, name)
		files[name] = string(b)
	}
}
