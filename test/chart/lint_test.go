package chart

import (
	"strings"
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

func TestHelmLint(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{}, {"--strict"}, append([]string{"--strict"}, nonDefault...)} {
		out, err := helm.Run(append([]string{"lint", testenv.ChartDir(), "--namespace", releaseNamespace}, args...)...)
		if err != nil {
			t.Errorf("helm lint %v: %v", args, err)
			continue
		}
		if !strings.Contains(out, "0 chart(s) failed") {
			t.Errorf("helm lint %v:\n%s", args, out)
		}
		if strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
			t.Errorf("helm lint %v reports problems:\n%s", args, out)
		}
	}
}
