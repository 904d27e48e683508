package cli

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes the binary toolgateBinary built, once every test ran.
func TestMain(m *testing.M) {
	code := m.Run()
	if binary.path != "" {
		_ = os.RemoveAll(filepath.Dir(binary.path))
	}
	os.Exit(code)
}
