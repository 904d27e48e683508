package manager

import (
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// The --reports* flags: off by default; each malformed value refused at
// start-up naming its flag; a sidecar URL without reports refused.
func TestReportsFlags(t *testing.T) {
	t.Parallel()
	d := DefaultOptions()
	if d.Reports.Enabled || d.Reports.Format != "openreports" || d.Reports.Window != time.Hour || d.Reports.SidecarURL != "" {
		t.Fatalf("defaults %+v", d.Reports)
	}
	parse := func(args ...string) (Options, error) {
		o := validDefaults()
		fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
		fs.SetOutput(io.Discard)
		o.AddFlags(fs)
		if err := fs.Parse(args); err != nil {
			return o, err
		}
		return o, o.Validate()
	}
	o, err := parse("--reports", "--reports-format=wgpolicyk8s", "--reports-window=30m", "--reports-listen=127.0.0.1:9090",
		"--reports-sidecar-url=http://toolgate-reports.toolgate-system.svc:8090/v1/decisions")
	if err != nil {
		t.Fatal(err)
	}
	if !o.Reports.Enabled || o.Reports.Format != "wgpolicyk8s" || o.Reports.Window != 30*time.Minute ||
		o.Reports.Listen != "127.0.0.1:9090" || !strings.HasSuffix(o.Reports.SidecarURL, "/v1/decisions") {
		t.Errorf("options %+v", o.Reports)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--reports", "--reports-format=policyreport"}, `--reports-format "policyreport": the format must be openreports or wgpolicyk8s`},
		{[]string{"--reports", "--reports-window=10s"}, "--reports-window 10s: the window must be from 1m to 168h"},
		{[]string{"--reports", "--reports-window=soon"}, "invalid argument"},
		{[]string{"--reports", "--reports-listen=8090"}, `--reports-listen "8090" is not host:port or :port`},
		{[]string{"--reports", "--reports-sidecar-url=ftp://x/y"}, "--reports-sidecar-url \"ftp://x/y\": must be an http or https URL"},
		{[]string{"--reports", "--reports-sidecar-url=http://user:pw@x/y"}, "no credentials"},
		{[]string{"--reports-sidecar-url=http://x/y"}, "--reports-sidecar-url needs --reports"},
	} {
		if _, err := parse(c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
}
