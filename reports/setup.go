package reports

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// Options configure reporting in the manager (the --reports* flags).
type Options struct {
	Enabled bool
	// Format is FormatOpenReports or FormatWGPolicy.
	Format string
	// Window is how far back a report counts.
	Window time.Duration
	// Listen is where the endpoint receiving the sidecars' batches
	// listens, as host:port or :port.
	Listen string
	// Interval is how often reports are written (DefaultInterval when 0).
	Interval time.Duration
	// PodNamespace and PodName are the manager's own Pod, which the
	// leader labels v1alpha1.LabelReportsReceiver; empty outside a Pod.
	PodNamespace, PodName string
}

// DefaultOptions are the flags' defaults: off.
func DefaultOptions() Options {
	return Options{Format: FormatOpenReports, Window: DefaultWindow, Listen: ":8090"}
}

// Validate names each option that cannot work.
func (o Options) Validate() error {
	if !o.Enabled {
		return nil
	}
	var errs []error
	if err := CheckFormat(o.Format); err != nil {
		errs = append(errs, fmt.Errorf("--reports-format %w", err))
	}
	if err := CheckWindow(o.Window); err != nil {
		errs = append(errs, fmt.Errorf("--reports-window %w", err))
	}
	if _, _, err := net.SplitHostPort(o.Listen); err != nil {
		errs = append(errs, fmt.Errorf("--reports-listen %q is not host:port or :port: %w", o.Listen, err))
	}
	return errors.Join(errs...)
}

var (
	metricsOnce sync.Once
	metricsErr  error
	shared      *Metrics
)

// registeredMetrics are the endpoint's metrics, registered once with the
// manager's registry however many managers a process builds (tests do).
func registeredMetrics() (*Metrics, error) {
	metricsOnce.Do(func() {
		shared = NewMetrics()
		for _, c := range shared.Collectors() {
			if err := metrics.Registry.Register(c); err != nil {
				metricsErr = fmt.Errorf("registering the reports metrics: %w", err)
			}
		}
	})
	return shared, metricsErr
}

// readHeaderTimeout and readTimeout bound a slow sender: a batch of a few
// megabytes arrives in far less.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 30 * time.Second
)

// Setup adds the endpoint and the writer to mgr. Both run on the leader
// only: the endpoint of a replica that does not write would count
// decisions nobody reports.
func Setup(mgr ctrl.Manager, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	m, err := registeredMetrics()
	if err != nil {
		return err
	}
	agg := NewAggregator(AggregatorOptions{Window: o.Window})
	log := ctrl.Log.WithName("reports")
	h := &Handler{Auth: &TokenReviewer{Client: mgr.GetClient()}, Agg: agg, Metrics: m}
	w := &Writer{Client: mgr.GetClient(), Agg: agg, Format: o.Format, Window: o.Window}
	interval := o.Interval
	if interval <= 0 {
		interval = DefaultInterval
	}
	// A direct client: the manager's does not write before it starts.
	direct, err := client.New(mgr.GetConfig(), client.Options{Scheme: mgr.GetScheme()})
	if err != nil {
		return err
	}
	self := receiver{client: direct, namespace: o.PodNamespace, pod: o.PodName}
	unmark, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := self.mark(unmark, false); err != nil {
		log.Error(err, "taking the reports receiver label off this Pod: a former leader's label would send sidecars here until it leads again")
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		mux := http.NewServeMux()
		mux.Handle(v1alpha1.ReportsPath, h)
		srv := &http.Server{Addr: o.Listen, Handler: mux, ReadHeaderTimeout: readHeaderTimeout, ReadTimeout: readTimeout}
		l, err := net.Listen("tcp", o.Listen)
		if err != nil {
			// Reports are an observation: the operator publishes
			// bundles without them.
			log.Error(err, "the reports endpoint cannot listen: no reports are written")
			return nil
		}
		go func() { _ = srv.Serve(l) }()
		defer func() {
			shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(shutdown)
		}()
		if err := self.mark(ctx, true); err != nil {
			log.Error(err, "labelling this Pod as the reports receiver: sidecars cannot reach this endpoint through the reports Service")
		}
		defer func() {
			off, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = self.mark(off, false)
		}()
		log.Info("receiving sidecars' decisions", "listen", l.Addr().String(), "format", o.Format, "window", o.Window)
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-tick.C:
				if err := w.Flush(ctx); err != nil {
					log.Error(err, "writing reports")
				}
			}
		}
	}))
}
