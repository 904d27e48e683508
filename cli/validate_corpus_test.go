package cli

import (
	"slices"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestValidateCorpus holds `toolgate validate` to the expectation each
// corpus file states. webhook's TestValidateAgreesWithTheAPIServer holds the
// real API server (with the webhook) to the same expectations.
func TestValidateCorpus(t *testing.T) {
	for _, c := range testenv.ValidateCorpus(t) {
		t.Run(c.Name, func(t *testing.T) {
			o := run(t, "", "validate", "-f", c.Path)
			want := ExitProblems
			if c.Accept {
				want = 0
			}
			if o.code != want {
				t.Fatalf("exit %d, want %d\n%s%s", o.code, want, o.stdout, o.stderr)
			}
			if got := testenv.ProblemFields(t, o.stdout, c.Path); !slices.Equal(got, c.Fields) {
				t.Errorf("fields named %q, want %q\n%s", got, c.Fields, o.stdout)
			}
		})
	}
}
