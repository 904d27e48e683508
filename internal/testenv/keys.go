package testenv

import (
	"testing"

	"github.com/toolgate/toolgate/bundle"
)

// Keyring is a keyring of n fresh signing keys, the first signing: what
// the operator keeps in its Secret, for tests that sign bundles.
func Keyring(t testing.TB, n int) *bundle.Keyring {
	t.Helper()
	keys := make([]bundle.SigningKey, 0, n)
	for range n {
		k, err := bundle.GenerateSigningKey()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	r, err := bundle.NewKeyring(keys)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
