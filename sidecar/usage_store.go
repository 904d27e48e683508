package sidecar

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/usage"
	"github.com/toolgate/toolgate/usage/redisstore"
)

// DefaultClusterName prefixes the shared usage store's keys when
// --cluster-name is not given.
const DefaultClusterName = "default"

// maxUsageStoreTimeout bounds --usage-store-timeout: a limited call waits
// for the store at most this long, so past it the value is a typo.
const maxUsageStoreTimeout = 10 * time.Second

// usageStoreOpenTimeout bounds connecting, authenticating and selecting
// the database at start: longer than a call's round trip, since a new
// connection (and TLS) costs several.
const usageStoreOpenTimeout = 10 * time.Second

// usageStoreCheckEvery is how often the sidecar asks the store whether it
// answers, for /readyz and toolgate_usage_store_up: a store back up is
// seen within a second, without a restart.
const usageStoreCheckEvery = time.Second

// validateUsageStore checks the shared usage store's flags, each error
// naming its flag.
func (o *Options) validateUsageStore() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if o.UsageStoreTimeout <= 0 || o.UsageStoreTimeout > maxUsageStoreTimeout {
		add("--usage-store-timeout must be positive and at most %v, not %v", maxUsageStoreTimeout, o.UsageStoreTimeout)
	}
	if o.ClusterName == "" {
		add("--cluster-name must not be empty (it prefixes the shared usage store's keys; the default is %q)", DefaultClusterName)
	} else if msgs := validation.IsValidLabelValue(o.ClusterName); len(msgs) > 0 {
		add("--cluster-name %q: %s", o.ClusterName, strings.Join(msgs, "; "))
	}
	if o.UsageStore == "" {
		if o.UsageStorePasswordFile != "" {
			add("--usage-store-password-file is only used with --usage-store")
		}
		if o.UsageStoreCAFile != "" {
			add("--usage-store-ca-file is only used with --usage-store")
		}
		return errors.Join(errs...)
	}
	tls, err := redisstore.CheckURL(o.UsageStore)
	if err != nil {
		errs = append(errs, fmt.Errorf("--usage-store: %w", err))
	} else if o.UsageStoreCAFile != "" && !tls {
		add("--usage-store-ca-file is only used with a rediss:// (TLS) --usage-store")
	}
	if o.usageNamespace() == "" {
		add("--usage-store needs the namespace whose limits it counts: give --configmap NAMESPACE/NAME or --bundle-namespace, or set POD_NAMESPACE")
	}
	return errors.Join(errs...)
}

// usageNamespace is the namespace whose shared counters this sidecar
// counts in: its bundle's (--configmap, --bundle-namespace), else
// POD_NAMESPACE.
func (o *Options) usageNamespace() string {
	if ns := o.bundleNamespace(); ns != "" {
		return ns
	}
	return os.Getenv("POD_NAMESPACE")
}

// usageStore is the shared usage store the decision core counts shared
// limits in, and whether it answers now.
type usageStore struct {
	store   usage.SharedStore
	timeout time.Duration
	metrics *decide.StoreMetrics
	mu      sync.Mutex
	down    error // why it does not answer; nil when it does
}

// openUsageStore connects to --usage-store: a wrong password or an unknown
// database is an error at start, and the sidecar exits with it (kubelet
// restarts it) rather than serve limits it cannot count. A server that is
// unreachable or slow at start is no reason to stop the agent's unlimited
// calls too: the sidecar starts not ready, denies calls under shared
// limits USAGE_UNAVAILABLE, and counts them once the server answers (watch).
// Nil without --usage-store.
func (s *Server) openUsageStore() (*usageStore, error) {
	o := s.opts
	if o.UsageStore == "" {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), usageStoreOpenTimeout)
	defer cancel()
	cfg := redisstore.Config{URL: o.UsageStore, PasswordFile: o.UsageStorePasswordFile,
		CAFile: o.UsageStoreCAFile, Timeout: o.UsageStoreTimeout, Cluster: o.ClusterName, Namespace: o.usageNamespace()}
	st, err := redisstore.Open(ctx, cfg)
	var down error
	if errors.Is(err, usage.ErrUnavailable) {
		down = err
		st, err = redisstore.New(cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("--usage-store %s: %w", o.UsageStore, err)
	}
	m := decide.NewStoreMetrics(s.metrics.registry)
	if down != nil {
		m.Up.Set(0)
		s.log.Error("the usage store does not answer at start: calls under shared limits are denied "+string(decide.CodeUsageUnavailable)+
			" (unless failOpen) and the sidecar is not ready until it does", "url", o.UsageStore, "error", down)
	} else {
		m.Up.Set(1)
	}
	s.log.Info("counting shared limits in the usage store", "url", o.UsageStore, "cluster", o.ClusterName,
		"namespace", o.usageNamespace(), "timeout", o.UsageStoreTimeout)
	return &usageStore{store: st, timeout: o.UsageStoreTimeout, metrics: m, down: down}, nil
}

// watch asks the store whether it answers every usageStoreCheckEvery
// until ctx ends, so that readiness and toolgate_usage_store_up follow it
// down and back up.
func (u *usageStore) watch(ctx context.Context, s *Server) {
	t := time.NewTicker(usageStoreCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		u.check(ctx, s)
	}
}

func (u *usageStore) check(ctx context.Context, s *Server) {
	cctx, cancel := context.WithTimeout(ctx, u.timeout)
	err := u.store.Check(cctx)
	cancel()
	if ctx.Err() != nil {
		return
	}
	u.mu.Lock()
	was := u.down
	u.down = err
	u.mu.Unlock()
	switch {
	case err != nil && was == nil:
		u.metrics.Up.Set(0)
		s.log.Error("the usage store does not answer: calls under shared limits are denied "+string(decide.CodeUsageUnavailable)+" (unless failOpen) and the sidecar is not ready until it does", "error", err)
	case err == nil && was != nil:
		u.metrics.Up.Set(1)
		s.log.Info("the usage store answers again: shared limits are counted")
	}
}

// unavailable is why the store does not answer, nil when it does (or
// when there is none).
func (u *usageStore) unavailable() error {
	if u == nil {
		return nil
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.down
}

func (u *usageStore) close() error {
	if u == nil {
		return nil
	}
	return u.store.Close()
}
