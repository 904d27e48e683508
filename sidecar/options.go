package sidecar

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/approval"
	"github.com/toolgate/toolgate/bundle"
	"github.com/toolgate/toolgate/bundlesource"
	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/decisionlog"
	"github.com/toolgate/toolgate/endpoint"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/httploop"
	"github.com/toolgate/toolgate/mcp"
	"github.com/toolgate/toolgate/sidecarlease"
	"github.com/toolgate/toolgate/usage"
)

// Decision log destinations for --decision-log.
const (
	DecisionLogStdout = "stdout"
	DecisionLogNone   = "none"
)

const maxDecisionLogQueue = 1_000_000

// Bounds on the limit flags: past them a value is a typo, not a tuning.
const (
	maxConnectionsLimit       = 100_000
	maxEvaluationsLimit       = 100_000
	maxBodyBytesInFlightLimit = 1 << 30
	minDecisionLogQueueBytes  = 64 << 10
	maxDecisionLogQueueBytes  = 1 << 30
	maxTimeout                = time.Hour
)

// Options configure one sidecar process. NewCommand fills them from flags;
// tests and the load generator fill them directly.
type Options struct {
	// Listen are the addresses decisions are served on, each host:port,
	// or unix:/path (also unix:///path) for a Unix socket. Injected
	// sidecars serve a socket in a directory only they can write, and the
	// loopback port for clients that cannot use a socket.
	Listen []string
	// MetricsListen, when set, also serves /metrics, /healthz and /readyz
	// (never decisions) there: Prometheus cannot reach a loopback listener.
	MetricsListen string
	// AgentID, when set, is the only agent_id this sidecar decides for: a
	// request naming another one is decided as AgentID and the mismatch is
	// logged.
	AgentID string
	// ServiceAccount is the ServiceAccount this sidecar runs as (the
	// injector passes the Pod's serviceAccountName): a FrozenAgent naming
	// it freezes this sidecar whatever agent_id a request carries. A
	// request cannot set it.
	ServiceAccount string
	// Roles, when not nil, are the only roles this sidecar decides with:
	// they replace a request's roles (an empty list binds no roles). Nil
	// leaves a request's roles as the client sent them.
	Roles []string
	// Environment, when set, replaces a request's environment.
	Environment string

	// UsageMaxKeys and UsageMaxEventsPerKey bound the counters of allowed
	// calls that rateLimit and tokenBudget read (usage.Ledger).
	UsageMaxKeys         int
	UsageMaxEventsPerKey int
	// ApprovalsMaxPending caps an agent's pending ApprovalRequests: past
	// it an asked call is denied APPROVAL_QUEUE_FULL.
	ApprovalsMaxPending int
	// UsageState, when set, is the file the counters are kept in across
	// restarts (usage.Ledger.OpenState): the injector puts it in the
	// sidecar's own volume, which the agent does not mount.
	UsageState string
	// UsageStore is the shared usage store (redis://HOST:PORT/DB, or
	// rediss:// for TLS) that counts the limits with store: shared, one
	// count across every sidecar of the namespace; empty: none, and a call
	// such a limit reaches is denied USAGE_UNAVAILABLE (unless failOpen).
	UsageStore string
	// UsageStorePasswordFile holds the store's password (never in the
	// URL); UsageStoreCAFile the CA a rediss:// server's certificate is
	// checked with, when not a public one.
	UsageStorePasswordFile string
	UsageStoreCAFile       string
	// UsageStoreTimeout bounds each round trip a limited call makes.
	UsageStoreTimeout time.Duration
	// ClusterName prefixes the store's keys, so that clusters sharing one
	// store never share a count.
	ClusterName string

	// Exactly one bundle source.
	ConfigMap  string // NAMESPACE/NAME
	BundleDir  string // a mounted ConfigMap volume
	BundleFile string // bundle.json, or gzip when it ends in .gz

	// Kubeconfig is used in --configmap mode; empty means KUBECONFIG, then
	// ~/.kube/config, then the in-cluster service account.
	Kubeconfig string
	// LeasePod and LeasePodUID name the sidecar's Pod (the injector passes
	// the downward API's metadata.name and metadata.uid): with them, and
	// --configmap, the sidecar reports what it serves in a Lease named
	// after the Pod (package sidecarlease). Both or neither.
	LeasePod    string
	LeasePodUID string
	// Version is the toolgate version the Lease reports (not a flag:
	// NewCommand's caller passes the build's).
	Version string
	// PollInterval re-reads --bundle-dir and --bundle-file even without a
	// file system event, in case one was missed.
	PollInterval time.Duration
	// CacheDir, when set, keeps the last good bundle on disk and serves it
	// at start until the source answers.
	CacheDir string

	// TrustedKeys is a PEM file of Ed25519 public keys, TrustedKeysPEM the
	// same inline (what the injector bakes into the Pod spec). With either,
	// only bundles signed by one of them for BundleNamespace (the
	// ConfigMap's namespace with ConfigMap) load; without, unsigned bundles
	// are accepted.
	TrustedKeys     string
	TrustedKeysPEM  string
	BundleNamespace string

	DecisionLog    string // stdout or none
	DecisionLogURL string
	// DecisionLogTokenFile holds the bearer token sent to DecisionLogURL,
	// read for each batch (a projected token rotates).
	DecisionLogTokenFile     string
	DecisionLogQueue         int
	DecisionLogBatch         int
	DecisionLogFlushInterval time.Duration
	// LogFields are request fields (dotted paths, or * for the whole
	// request) copied into each decision log line; by default only the
	// fixed fields (tool_name and the ids) are logged, never input.
	LogFields []string
	// Redact are request fields replaced by "[REDACTED]" wherever
	// LogFields would log them.
	Redact []string
	// LogLabels are KEY=VALUE pairs added to every decision log line as
	// "labels", in order: where a central sink needs to know which cluster,
	// namespace and pod decided.
	LogLabels []string

	// DecisionLogQueueBytes bounds each sink's queue in bytes (the events
	// and the strings and request they hold), beside DecisionLogQueue in
	// events: whichever is reached first drops new events, counted.
	DecisionLogQueueBytes int

	// Limits that keep a flood of connections or requests from starving
	// the sidecar. MaxConnections is per decision listener; at it, a new
	// connection evicts the one that has waited longest without a request
	// being evaluated (see connLimiter), so slow or idle connections cannot
	// lock out a client that sends its request at once.
	MaxConnections        int
	MetricsMaxConnections int
	ReadHeaderTimeout     time.Duration
	ReadTimeout           time.Duration // the whole request, headers and body
	WriteTimeout          time.Duration
	IdleTimeout           time.Duration
	// MaxMCPConnections is per listener too: the connections that carry
	// MCP proxy requests (streams, and calls waiting on the upstream) leave
	// MaxConnections for this budget of their own, so that however many
	// the agent holds, decisions and probes keep their slots
	// (httploop.Conn.HoldStream).
	MaxMCPConnections int
	// MaxEvaluations bounds the requests decoded and evaluated at once;
	// beyond it a request is denied OVERLOADED at once, never waited for.
	MaxEvaluations int
	// MaxBodyBytesInFlight bounds the bytes request bodies larger than a
	// pooled buffer (64 KiB) hold while read and decided, all listeners
	// together; a body that would take them past it is denied OVERLOADED
	// at once, never waited for.
	MaxBodyBytesInFlight int
	// MaxRequestElements bounds the JSON values in a request (400 past it).
	MaxRequestElements int
	// MaxTrace bounds an explain trace, in entries (engine.EvalOptions).
	MaxTrace int

	// MCP configures the MCP proxy (mcp.Options).
	MCP mcp.Options

	// Not flags: where decision log lines and operational logs go
	// (os.Stdout and a stderr text logger when nil).
	DecisionLogWriter io.Writer
	Logger            *slog.Logger
	// onMetricsListen is told the metrics listener's bound address (tests
	// listen on port 0).
	onMetricsListen func(net.Addr)
	// beforeEvaluate becomes the Server's (tests hold evaluations open).
	beforeEvaluate func(engine.Request)
	// onBodyReserve becomes the Server's (tests watch the body budget).
	onBodyReserve func(inFlight int64)
	// now, when set, is the clock decisions are made and calls counted
	// at (tests move it past a rate limit's window).
	now func() time.Time
}

// DefaultOptions are the flag defaults.
func DefaultOptions() Options {
	return Options{
		Listen:                   []string{endpoint.DefaultAddress},
		PollInterval:             10 * time.Second,
		DecisionLog:              DecisionLogStdout,
		DecisionLogQueue:         10000,
		DecisionLogQueueBytes:    8 << 20,
		DecisionLogBatch:         100,
		DecisionLogFlushInterval: time.Second,
		// One agent's calls arrive over a handful of connections, each
		// decided in microseconds; these leave ample room for that and
		// bound what a flood can hold: 128 connections, 16 MiB of
		// request bodies (each at most 1 MiB), 32 decodings of at most
		// 10,000 values.
		MaxConnections:        128,
		MetricsMaxConnections: 16,
		ReadHeaderTimeout:     2 * time.Second,
		ReadTimeout:           5 * time.Second,
		WriteTimeout:          5 * time.Second,
		IdleTimeout:           60 * time.Second,
		MaxEvaluations:        32,
		MaxBodyBytesInFlight:  16 << 20,
		MaxRequestElements:    engine.DefaultMaxElements,
		MaxTrace:              2000,
		UsageMaxKeys:          usage.DefaultMaxKeys,
		UsageMaxEventsPerKey:  usage.DefaultMaxEventsPerKey,
		UsageStoreTimeout:     decide.DefaultUsageStoreTimeout,
		ClusterName:           DefaultClusterName,
		ApprovalsMaxPending:   approval.DefaultMaxPendingPerAgent,
		MCP:                   mcp.Options{Listen: mcp.DefaultListen, MaxResultBytes: mcp.DefaultMaxResultBytes},
		// A held MCP stream costs the sidecar about 64 KiB (1,000 held
		// added 60 to 68 MiB of RSS in
		// TestHeldStreamsLeaveDecisionsAndProbesTheirCapacity): 128 hold
		// 8 MiB of the injected sidecar's 64 MiB.
		MaxMCPConnections: 128,
	}
}

// Validate reports every flag problem at once, each naming its flag.
func (o *Options) Validate() error {
	return errors.Join(o.validateSource(), o.validateServing())
}

func (o *Options) validateSource() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch n := o.sourceCount(); {
	case n == 0:
		add("one bundle source is required: --configmap NAMESPACE/NAME, --bundle-dir DIR or --bundle-file FILE")
	case n > 1:
		add("--configmap, --bundle-dir and --bundle-file are exclusive: give exactly one")
	}
	if o.ConfigMap != "" {
		if _, _, err := bundlesource.ParseConfigMapRef(o.ConfigMap); err != nil {
			add("--configmap: %v", err)
		}
	}
	if o.Kubeconfig != "" && o.ConfigMap == "" {
		add("--kubeconfig is only used with --configmap")
	}
	if err := sidecarlease.CheckPod(o.LeasePod, o.LeasePodUID); err != nil {
		errs = append(errs, err)
	} else if o.LeasePod != "" && o.ConfigMap == "" {
		add("--lease-pod is only used with --configmap: a sidecar that reads its bundle from a file cannot reach the API to write a Lease")
	}
	if o.PollInterval <= 0 {
		add("--poll-interval must be positive, not %v", o.PollInterval)
	}
	signed := o.TrustedKeys != "" || o.TrustedKeysPEM != ""
	switch {
	case o.BundleNamespace != "" && o.ConfigMap != "":
		add("--bundle-namespace is only used with --bundle-dir and --bundle-file (with --configmap the namespace is the ConfigMap's)")
	case o.BundleNamespace != "":
		if msgs := validation.IsDNS1123Label(o.BundleNamespace); len(msgs) > 0 {
			add("--bundle-namespace %q: %s", o.BundleNamespace, strings.Join(msgs, "; "))
		}
	case signed && o.ConfigMap == "" && o.sourceCount() == 1:
		add("--trusted-keys with --bundle-dir or --bundle-file needs --bundle-namespace: signatures name the namespace a bundle was published for")
	}
	return errors.Join(errs...)
}

// validateServing checks what New needs: everything but the bundle source.
func (o *Options) validateServing() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(o.Listen) == 0 {
		add("--listen: at least one address is required")
	}
	seen := map[string]bool{}
	for _, addr := range o.Listen {
		if err := httploop.CheckAddr(addr); err != nil {
			add("--listen: %v", err)
		} else if key, fixed := listenKey(addr); fixed && seen[key] {
			add("--listen %s is given twice", addr)
		} else {
			seen[key] = true
		}
	}
	if o.MetricsListen != "" {
		if err := httploop.CheckAddr(o.MetricsListen); err != nil {
			add("--metrics-listen: %v", err)
		} else if key, fixed := listenKey(o.MetricsListen); fixed && seen[key] {
			add("--metrics-listen must differ from --listen (%s)", o.MetricsListen)
		}
	}
	errs = append(errs, o.validateLimits())
	if len(o.AgentID) > v1alpha1.MaxAgentIDLength {
		add("--agent-id is %d characters long, more than %d", len(o.AgentID), v1alpha1.MaxAgentIDLength)
	}
	for _, r := range o.Roles {
		if err := v1alpha1.CheckBindingName(r); err != nil {
			add("--roles: %v", err)
		}
	}
	if len(o.Roles) > v1alpha1.MaxRoles {
		add("--roles: %d roles, more than %d", len(o.Roles), v1alpha1.MaxRoles)
	}
	if o.Environment != "" {
		if err := v1alpha1.CheckBindingName(o.Environment); err != nil {
			add("--environment: %v", err)
		}
	}
	if err := usage.CheckCaps(o.UsageMaxKeys, o.UsageMaxEventsPerKey); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, o.validateUsageStore())
	if o.ApprovalsMaxPending < 1 || o.ApprovalsMaxPending > 1000 {
		add("--approvals-max-pending %d: must be from 1 to 1000", o.ApprovalsMaxPending)
	}
	if o.ServiceAccount != "" {
		if msgs := validation.IsDNS1123Subdomain(o.ServiceAccount); len(msgs) > 0 {
			add("--service-account %q is not a ServiceAccount name: %s", o.ServiceAccount, strings.Join(msgs, "; "))
		}
	}
	if o.DecisionLog != DecisionLogStdout && o.DecisionLog != DecisionLogNone {
		add("--decision-log must be %s or %s, not %q", DecisionLogStdout, DecisionLogNone, o.DecisionLog)
	}
	if o.DecisionLogURL != "" {
		if err := validateSinkURL(o.DecisionLogURL); err != nil {
			add("--decision-log-url: %v", err)
		}
	} else if o.DecisionLogTokenFile != "" {
		add("--decision-log-token-file needs --decision-log-url: nothing would send the token")
	}
	// Queues are allocated up front (about 200 bytes an event), so the
	// bound keeps a typo from costing gigabytes.
	if o.DecisionLogQueue <= 0 || o.DecisionLogQueue > maxDecisionLogQueue {
		add("--decision-log-queue must be from 1 to %d, not %d", maxDecisionLogQueue, o.DecisionLogQueue)
	}
	if o.DecisionLogBatch <= 0 || o.DecisionLogBatch > maxDecisionLogQueue {
		add("--decision-log-batch must be from 1 to %d, not %d", maxDecisionLogQueue, o.DecisionLogBatch)
	}
	if o.DecisionLogFlushInterval <= 0 {
		add("--decision-log-flush-interval must be positive, not %v", o.DecisionLogFlushInterval)
	}
	if _, err := decisionlog.ParseLabels(o.LogLabels); err != nil {
		add("--decision-log-label: %v", err)
	}
	for _, f := range o.LogFields {
		if err := decisionlog.CheckField(f); err != nil {
			add("--log-fields: %v", err)
		}
	}
	for _, f := range o.Redact {
		if err := decisionlog.CheckRedact(f); err != nil {
			add("--redact: %v", err)
		}
	}
	if _, err := o.loadTrustedKeys(); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, o.validateMCP())
	return errors.Join(errs...)
}

// validateLimits checks the flags that bound connections, requests and
// the decision log's memory.
func (o *Options) validateLimits() error {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, c := range []struct {
		flag      string
		v, lo, hi int
	}{
		{"--max-connections", o.MaxConnections, 1, maxConnectionsLimit},
		{"--metrics-max-connections", o.MetricsMaxConnections, 1, maxConnectionsLimit},
		{"--max-mcp-connections", o.MaxMCPConnections, 1, maxConnectionsLimit},
		{"--max-evaluations", o.MaxEvaluations, 1, maxEvaluationsLimit},
		{"--max-body-bytes-in-flight", o.MaxBodyBytesInFlight, MaxRequestBytes, maxBodyBytesInFlightLimit},
		{"--max-request-elements", o.MaxRequestElements, 1, MaxRequestBytes},
		{"--max-trace", o.MaxTrace, 1, 10_000_000},
		{"--decision-log-queue-bytes", o.DecisionLogQueueBytes, minDecisionLogQueueBytes, maxDecisionLogQueueBytes},
	} {
		if c.v < c.lo || c.v > c.hi {
			add("%s must be from %d to %d, not %d", c.flag, c.lo, c.hi, c.v)
		}
	}
	if err := mcp.CheckMaxResultBytes(o.MCP.MaxResultBytes); err != nil {
		errs = append(errs, err)
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{
		{"--read-header-timeout", o.ReadHeaderTimeout}, {"--read-timeout", o.ReadTimeout},
		{"--write-timeout", o.WriteTimeout}, {"--idle-timeout", o.IdleTimeout},
	} {
		if d.v <= 0 || d.v > maxTimeout {
			add("%s must be positive and at most %v, not %v", d.flag, maxTimeout, d.v)
		}
	}
	if o.ReadHeaderTimeout > o.ReadTimeout && o.ReadTimeout > 0 {
		add("--read-header-timeout (%v) must not exceed --read-timeout (%v), which covers the headers too", o.ReadHeaderTimeout, o.ReadTimeout)
	}
	return errors.Join(errs...)
}

func (o *Options) sourceCount() int {
	n := 0
	for _, s := range []string{o.ConfigMap, o.BundleDir, o.BundleFile} {
		if s != "" {
			n++
		}
	}
	return n
}

// socketPath reads a Unix socket address to listen on: endpoint.SocketPath.
func socketPath(addr string) (path string, isUnix bool, err error) { return endpoint.SocketPath(addr) }

// listenKey identifies an address, so the same socket spelled two ways
// counts as given twice. Port 0 is never a duplicate: it picks a free port
// each time.
func listenKey(addr string) (key string, fixed bool) {
	if path, isUnix, err := socketPath(addr); isUnix && err == nil {
		return endpoint.UnixURL(filepath.Clean(path)), true
	}
	return addr, !strings.HasSuffix(addr, ":0")
}

func validateSinkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q: scheme must be http or https", raw)
	}
	if u.Host == "" {
		return fmt.Errorf("%q has no host", raw)
	}
	return nil
}

// decisionLogConfig is what the decision log takes of the options.
func (o Options) decisionLogConfig() decisionlog.Config {
	return decisionlog.Config{
		Stdout: o.DecisionLog == DecisionLogStdout, Writer: o.DecisionLogWriter,
		URL: o.DecisionLogURL, TokenFile: o.DecisionLogTokenFile, Batch: o.DecisionLogBatch, FlushInterval: o.DecisionLogFlushInterval,
		Queue: o.DecisionLogQueue, QueueBytes: o.DecisionLogQueueBytes,
		Fields: o.LogFields, Redact: o.Redact, Labels: o.LogLabels,
	}
}

// validateMCP checks the MCP flags, and that the proxy's address is not
// one the decisions or metrics are served on.
func (o *Options) validateMCP() error {
	err := o.MCP.Check()
	if err != nil || len(o.MCP.Upstreams) == 0 {
		return err
	}
	key, fixed := listenKey(o.MCP.Listen)
	if !fixed {
		return nil
	}
	for _, addr := range append([]string{o.MetricsListen}, o.Listen...) {
		if k, _ := listenKey(addr); k == key {
			return fmt.Errorf("--mcp-listen %s is also a --listen or --metrics-listen address; the proxy needs its own (it is served on the Unix socket too)", o.MCP.Listen)
		}
	}
	return nil
}

// deciderConfig is what the decision core takes of the options.
func (o Options) deciderConfig() decide.Config {
	return decide.Config{
		AgentID: o.AgentID, Roles: o.Roles, Environment: o.Environment, ServiceAccount: o.ServiceAccount,
		MaxEvaluations: o.MaxEvaluations, MaxBodyBytesInFlight: o.MaxBodyBytesInFlight,
		MaxRequestElements: o.MaxRequestElements, MaxTrace: o.MaxTrace,
		UsageMaxKeys: o.UsageMaxKeys, UsageMaxEventsPerKey: o.UsageMaxEventsPerKey,
		UsageStoreTimeout: o.UsageStoreTimeout,
		Now:               o.now, BeforeEvaluate: o.beforeEvaluate, OnBodyReserve: o.onBodyReserve,
	}
}

// loadTrustedKeys reads --trusted-keys and --trusted-keys-pem; nil, nil
// when neither is given.
func (o *Options) loadTrustedKeys() (*bundle.TrustedKeys, error) {
	if o.TrustedKeys == "" && o.TrustedKeysPEM == "" {
		return nil, nil
	}
	var pemData []byte
	if o.TrustedKeys != "" {
		data, err := os.ReadFile(o.TrustedKeys)
		if err != nil {
			return nil, fmt.Errorf("--trusted-keys: %w", err)
		}
		if _, err := bundle.ParseTrustedKeys(data); err != nil {
			return nil, fmt.Errorf("--trusted-keys %s: %w", o.TrustedKeys, err)
		}
		pemData = append(pemData, data...)
		pemData = append(pemData, '\n')
	}
	if o.TrustedKeysPEM != "" {
		if _, err := bundle.ParseTrustedKeys([]byte(o.TrustedKeysPEM)); err != nil {
			return nil, fmt.Errorf("--trusted-keys-pem: %w", err)
		}
		pemData = append(pemData, o.TrustedKeysPEM...)
	}
	return bundle.ParseTrustedKeys(pemData)
}

// bundleNamespace is the namespace signatures must name: the bundle
// ConfigMap's, or --bundle-namespace for the file sources.
func (o *Options) bundleNamespace() string {
	if ns, _, err := bundlesource.ParseConfigMapRef(o.ConfigMap); err == nil {
		return ns
	}
	return o.BundleNamespace
}

// sourceConfig is what the bundle sources take of the options; New adds
// the trusted keys and the MCP proxy's callbacks.
func (o Options) sourceConfig() bundlesource.Config {
	return bundlesource.Config{
		ConfigMap: o.ConfigMap, BundleDir: o.BundleDir, BundleFile: o.BundleFile,
		Kubeconfig: o.Kubeconfig, PollInterval: o.PollInterval, CacheDir: o.CacheDir,
		Namespace: o.bundleNamespace(),
	}
}
