package manager

import (
	"testing"

	"github.com/toolgate/toolgate/internal/testenv"
)

// Every signing metric the chart's alerts watch exists.
func TestAlertsWatchExportedSigningMetrics(t *testing.T) {
	testenv.RequireAlertMetrics(t, "toolgate_signing_", signingKeysValid)
}
