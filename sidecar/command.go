package sidecar

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/toolgate/toolgate/internal/tracing"
)

// ServiceName is the service.name of its spans unless OTEL_SERVICE_NAME
// says otherwise (docs/observability.md).
const ServiceName = "toolgate-sidecar"

// NewCommand returns `toolgate sidecar`, reporting version (the build's,
// cli.BuildVersion) in its Lease.
func NewCommand(version string) *cobra.Command {
	opts := DefaultOptions()
	opts.Version = version
	cmd := &cobra.Command{
		Use:   "sidecar",
		Short: "Serve tool-call decisions to the agent next to it, from a hot-reloaded policy bundle",
		Long: `Serve tool-call decisions on localhost (POST /v1/evaluate) from the namespace's policy
bundle, reloaded without blocking decisions. Exactly one bundle source:

  --configmap NAMESPACE/NAME   watch the bundle ConfigMap through the API: a change applies as
                               soon as the watch delivers it (needs get/list/watch on it); also
                               watches the namespace's FrozenAgents (get/list/watch on them) and
                               applies them at once, without the operator
  --bundle-dir DIR             a mounted ConfigMap volume: kubelet refreshes it only every
                               60-120 s, so a freeze takes that long to bite; a directory of
                               manifests is refused (build one with toolgate bundle, use --bundle-file)
  --bundle-file FILE           a bundle document on disk (gzip when it ends in .gz), for local use

Before a bundle is loaded, and after the bundle ConfigMap is deleted, every decision is deny
NO_POLICIES and /readyz answers 503. A corrupt bundle is rejected and the last good one keeps
serving; so does an unreachable API server.

Serve agents on a Unix socket in a directory they cannot write (--listen unix:///path; a
loopback port can be taken over by any process in the Pod). Every limit below denies or
refuses, never waits or allows: past --max-evaluations, or when its body would take the
bodies being read past --max-body-bytes-in-flight, a request is denied OVERLOADED.

With --trusted-keys (or --trusted-keys-pem), a bundle must carry the operator's signature
(bundle.sig) by one of those keys, for this namespace, with a publish counter not lower than
the one served: an unsigned, wrongly signed, unknown-key or rolled-back bundle is refused like
a corrupt one (counted in toolgate_sidecar_bundle_rejected_total{reason}, logged, shown in
/readyz as lastRejected) and the last good one keeps serving.

With --lease-pod and --lease-pod-uid (the injector passes both) a --configmap sidecar reports
what it serves (revision, freezes applied, last refusal) in a Lease named after its Pod, at
once on a change and every 10 s; a failed write is logged and counted, never a decision.

With --mcp-upstream NAME=URL the sidecar is also an MCP proxy (Streamable HTTP) at
http://<--mcp-listen>/mcp/NAME and on the Unix socket: every tools/call is decided on its
arguments before it is forwarded (a deny is answered as a CallToolResult with isError), tools
the bundle denies whatever the arguments are hidden from tools/list, and --mcp-upstream-auth
adds the upstream credential the agent never holds.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// First, before a credential is read (makeUndumpable says why).
			if err := makeUndumpable(); err != nil {
				slog.New(slog.NewTextHandler(os.Stderr, nil)).Warn(
					"cannot make the process non-dumpable: a process of the same user that sees it can read its environment and files through /proc", "err", err)
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return tracing.Run(ctx, ServiceName, func(ctx context.Context) error { return Run(ctx, opts, nil) })
		},
	}
	opts.AddFlags(cmd.Flags())
	cmd.AddCommand(newProbeCommand())
	return cmd
}

// AddFlags binds every option to a flag.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&o.Listen, "listen", o.Listen, "address to serve decisions on: host:port, or unix:/path (also unix:///path) for a Unix socket, created 0666; repeat to serve on several")
	fs.StringVar(&o.MetricsListen, "metrics-listen", o.MetricsListen, "also serve GET /metrics, /healthz and /readyz (never decisions) here, e.g. :9191 for Prometheus; host:port or unix:/path")
	fs.StringVar(&o.AgentID, "agent-id", o.AgentID, "the agent this sidecar decides for (from the downward API); a request's different agent_id is overridden and logged")
	fs.Var(rolesFlag{&o.Roles}, "roles", "the roles this sidecar decides with, comma separated (the injector sets them from the Pod annotation toolgate.dev/roles): they replace a request's roles, and a difference is logged; --roles= binds no roles. Unset: a request's own roles are used")
	fs.StringVar(&o.Environment, "environment", o.Environment, "the environment this sidecar decides in, e.g. prod (the injector sets it from the Pod annotation toolgate.dev/environment): it replaces a request's environment, and a difference is logged")
	fs.IntVar(&o.ApprovalsMaxPending, "approvals-max-pending", o.ApprovalsMaxPending, "ApprovalRequests an agent may have pending (--configmap only: a sidecar without API access denies asked calls APPROVAL_UNAVAILABLE); past it an asked call is denied APPROVAL_QUEUE_FULL")
	fs.IntVar(&o.UsageMaxKeys, "usage-max-keys", o.UsageMaxKeys, "counters of allowed calls kept for rateLimit and tokenBudget (one per agent or session and tool, one more per agent or session for tokens); an agent's counters are never forgotten while a limit's window reaches their calls, its session counters take at most half, and a call that needs a counter when none may be forgotten is denied USAGE_UNAVAILABLE")
	fs.StringVar(&o.UsageState, "usage-state", o.UsageState, "keep the counters of allowed calls in this file (in a volume the agent cannot write), so that a restart keeps every limit's count; a file that cannot be read is moved aside and every limit whose window reaches back before the start is denied USAGE_UNAVAILABLE until that window has passed")
	fs.StringVar(&o.UsageStore, "usage-store", o.UsageStore, "count the limits with store: shared in this Redis (7.x or Valkey): redis://[USER@]HOST:PORT/DB, rediss:// for TLS; one count across every sidecar of the namespace, one round trip per call such a limit reaches. A wrong password or database is an error at start; while it does not answer those calls are denied USAGE_UNAVAILABLE (unless failOpen) and /readyz answers 503")
	fs.StringVar(&o.UsageStorePasswordFile, "usage-store-password-file", o.UsageStorePasswordFile, "file holding the --usage-store password (a password in the URL is refused)")
	fs.StringVar(&o.UsageStoreCAFile, "usage-store-ca-file", o.UsageStoreCAFile, "PEM file of the CA a rediss:// --usage-store's certificate is checked with (default: the system's)")
	fs.DurationVar(&o.UsageStoreTimeout, "usage-store-timeout", o.UsageStoreTimeout, "longest a call under a shared limit waits for --usage-store; past it the call is denied USAGE_UNAVAILABLE (unless failOpen)")
	fs.StringVar(&o.ClusterName, "cluster-name", o.ClusterName, "this cluster's name, prefixing the --usage-store keys (with the namespace), so that clusters sharing one store never share a count")
	fs.IntVar(&o.UsageMaxEventsPerKey, "usage-max-events-per-key", o.UsageMaxEventsPerKey, "calls each counter keeps apart; past it neighbouring calls merge into the later one, which can only over-count (a limit then fails closed), by a small fraction of the calls near a window's start")
	fs.StringVar(&o.ServiceAccount, "service-account", o.ServiceAccount, "the ServiceAccount this sidecar runs as (the injector sets it from the Pod spec): a FrozenAgent naming it freezes this sidecar whatever the request's agent_id")
	fs.StringVar(&o.ConfigMap, "configmap", o.ConfigMap, "bundle source: watch the ConfigMap NAMESPACE/NAME through the API")
	fs.StringVar(&o.BundleDir, "bundle-dir", o.BundleDir, "bundle source: a mounted ConfigMap volume holding bundle.json or bundle.json.gz")
	fs.StringVar(&o.BundleFile, "bundle-file", o.BundleFile, "bundle source: a bundle document (gzip when the name ends in .gz)")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig for --configmap (default: KUBECONFIG, ~/.kube/config, then in-cluster)")
	fs.StringVar(&o.LeasePod, "lease-pod", o.LeasePod, "with --configmap: the sidecar's Pod name (downward API metadata.name); it then reports the bundle revision it serves, the freezes it applies and the bundle it refused in a Lease of that name, renewed every 10 s. Needs --lease-pod-uid")
	fs.StringVar(&o.LeasePodUID, "lease-pod-uid", o.LeasePodUID, "the sidecar's Pod UID (downward API metadata.uid): the Lease's owner, so it is deleted with the Pod. Needs --lease-pod")
	fs.DurationVar(&o.PollInterval, "poll-interval", o.PollInterval, "re-read --bundle-dir or --bundle-file this often even without a file event")
	fs.StringVar(&o.TrustedKeys, "trusted-keys", o.TrustedKeys, "PEM file of one or more Ed25519 public keys (the operator's toolgate-signing-keys keys.pem): only bundles signed by one of them load; without it (or --trusted-keys-pem) unsigned bundles are accepted")
	fs.StringVar(&o.TrustedKeysPEM, "trusted-keys-pem", o.TrustedKeysPEM, "the same keys inline, as PEM text (what the injector puts in the Pod spec)")
	fs.StringVar(&o.BundleNamespace, "bundle-namespace", o.BundleNamespace, "with trusted keys and --bundle-dir or --bundle-file: the namespace the bundle must be signed for")
	fs.StringVar(&o.CacheDir, "cache-dir", o.CacheDir, "keep the last good bundle here and serve it at start until the source answers")
	fs.StringVar(&o.DecisionLog, "decision-log", o.DecisionLog, "where decision log lines go: stdout or none")
	fs.StringVar(&o.DecisionLogURL, "decision-log-url", o.DecisionLogURL, "also POST decision log lines, batched as JSON arrays, to this http(s) URL")
	fs.StringVar(&o.DecisionLogTokenFile, "decision-log-token-file", o.DecisionLogTokenFile, "file holding a bearer token sent with each batch to --decision-log-url, read again for each batch (a projected ServiceAccount token rotates)")
	fs.IntVar(&o.DecisionLogQueue, "decision-log-queue", o.DecisionLogQueue, "events each decision log sink may hold before it drops (and counts) new ones")
	fs.IntVar(&o.DecisionLogQueueBytes, "decision-log-queue-bytes", o.DecisionLogQueueBytes, "bytes each decision log sink may hold (events with their strings and logged request fields) before it drops (and counts) new ones")
	fs.IntVar(&o.DecisionLogBatch, "decision-log-batch", o.DecisionLogBatch, "events per batch sent to --decision-log-url")
	fs.DurationVar(&o.DecisionLogFlushInterval, "decision-log-flush-interval", o.DecisionLogFlushInterval, "longest an event waits in a partial batch for --decision-log-url")
	fs.StringSliceVar(&o.LogFields, "log-fields", o.LogFields, "request fields to include in decision log lines (dotted paths, or * for the whole request); default: none beyond tool_name and the ids")
	fs.StringArrayVar(&o.LogLabels, "decision-log-label", o.LogLabels, "KEY=VALUE added to every decision log line under \"labels\" (repeatable), e.g. cluster=prod-eu")
	fs.IntVar(&o.MaxConnections, "max-connections", o.MaxConnections, "open connections per --listen address; at the limit a new one evicts the connection waiting longest that never had a request decided, else the one idle longest (never one being evaluated)")
	fs.IntVar(&o.MetricsMaxConnections, "metrics-max-connections", o.MetricsMaxConnections, "open connections on --metrics-listen, evicted the same way")
	fs.IntVar(&o.MaxMCPConnections, "max-mcp-connections", o.MaxMCPConnections, "connections per listener that carry MCP proxy requests (streams, calls waiting on the upstream), held apart from --max-connections so that they never take the slots decisions and probes use; at the limit a new one evicts an idle one, else it is answered 503")
	fs.DurationVar(&o.ReadHeaderTimeout, "read-header-timeout", o.ReadHeaderTimeout, "longest a client may take to send a request's headers (both listeners)")
	fs.DurationVar(&o.ReadTimeout, "read-timeout", o.ReadTimeout, "longest a client may take to send a whole request, headers and body (both listeners)")
	fs.DurationVar(&o.WriteTimeout, "write-timeout", o.WriteTimeout, "longest writing a response may take (both listeners)")
	fs.DurationVar(&o.IdleTimeout, "idle-timeout", o.IdleTimeout, "how long a keep-alive connection may wait for its next request (both listeners)")
	fs.IntVar(&o.MaxEvaluations, "max-evaluations", o.MaxEvaluations, "requests decoded and evaluated at once; more are denied OVERLOADED at once, never queued")
	fs.IntVar(&o.MaxBodyBytesInFlight, "max-body-bytes-in-flight", o.MaxBodyBytesInFlight, "bytes request bodies larger than 64 KiB may hold while read and decided, all listeners together (from 1 MiB, the largest body, to 1 GiB); a body that would go past it is denied OVERLOADED at once, never waited for")
	fs.IntVar(&o.MaxRequestElements, "max-request-elements", o.MaxRequestElements, "JSON values one request may hold (each object, array, string, number, boolean, null); more is a 400")
	fs.IntVar(&o.MaxTrace, "max-trace", o.MaxTrace, "entries an ?explain=true trace may hold (each rule and each of its conditions counts one); past it the trace stops and says traceTruncated")
	o.MCP.AddFlags(fs)
	fs.StringSliceVar(&o.Redact, "redact", o.Redact, "request fields to replace with [REDACTED] in what --log-fields logs (a last segment * hides every child, e.g. input.*)")
}
