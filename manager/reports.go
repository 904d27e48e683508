package manager

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/spf13/pflag"

	"github.com/toolgate/toolgate/reports"
)

// ReportsOptions are the --reports* flags: the operator's endpoint for the
// sidecars' decision logs, the reports it writes from them, and whether
// injected sidecars send there.
type ReportsOptions struct {
	reports.Options
	// SidecarURL is where injected sidecars send their decision log
	// batches (the endpoint's Service); empty: they send none.
	SidecarURL string
}

func (r *ReportsOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&r.Enabled, "reports", r.Enabled,
		"receive the sidecars' decision logs and keep one policy report per namespace summarising them (docs/reports.md)")
	fs.StringVar(&r.Format, "reports-format", r.Format,
		`the reports' kind: "openreports" (openreports.io/v1alpha1 Report) or "wgpolicyk8s" (wgpolicyk8s.io/v1alpha2 PolicyReport)`)
	fs.DurationVar(&r.Window, "reports-window", r.Window, "how far back a report counts decisions, from 1m to 168h")
	fs.StringVar(&r.Listen, "reports-listen", r.Listen,
		"address of the endpoint receiving the sidecars' decision log batches (plain HTTP, each batch authenticated by its ServiceAccount token)")
	fs.StringVar(&r.SidecarURL, "reports-sidecar-url", r.SidecarURL,
		"with --reports and --sidecar-image: the URL injected sidecars send their decision logs to, such as http://toolgate-reports.toolgate-system.svc:8090"+
			"/v1/decisions; empty: they send none")
}

func (r ReportsOptions) validate() error {
	if !r.Enabled {
		if r.SidecarURL != "" {
			return errors.New("--reports-sidecar-url needs --reports: nothing would receive the sidecars' decisions")
		}
		return nil
	}
	errs := []error{r.Validate()}
	if r.SidecarURL != "" {
		u, err := url.Parse(r.SidecarURL)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("--reports-sidecar-url: %w", err))
		case u.Scheme != "http" && u.Scheme != "https", u.Host == "", u.User != nil:
			errs = append(errs, fmt.Errorf("--reports-sidecar-url %q: must be an http or https URL with a host and no credentials", r.SidecarURL))
		}
	}
	return errors.Join(errs...)
}
