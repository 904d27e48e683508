package e2e

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// TestOperatorAlertSeriesExistAtStart: the manager, a real process that
// has published nothing yet, already exports at 0 every counter series
// the chart's alerts take the increase() of (publishes with result
// too_large and failed). Before, those series appeared at 1 with the first
// failure, which increase() over the alert's window does not see.
func TestOperatorAlertSeriesExistAtStart(t *testing.T) {
	dir := t.TempDir()
	bin, cluster := startCluster(t, dir)
	addr := testenv.FreeLoopbackAddr(t)
	args := append(cluster.ManagerArgs(), "--metrics-bind-address", addr)
	if _, err := cluster.StartProcess("manager", bin, args...); err != nil {
		t.Fatal(err)
	}
	var body string
	testenv.EventuallyWithin(t, 60*time.Second, 100*time.Millisecond, "the manager's /metrics", func() (bool, string) {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil || resp.StatusCode != http.StatusOK {
			return false, resp.Status
		}
		body = string(b)
		return true, ""
	})
	testenv.RequireAlertSeriesAtZero(t, "toolgate_bundle_", body)
}
