package manager

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestValidateRejectsMalformedOptions(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	tests := []struct {
		name  string
		edit  func(*Options)
		field string // the flag the error must name
	}{
		{"metrics no port", func(o *Options) { o.MetricsBindAddress = "localhost" }, "--metrics-bind-address"},
		{"metrics port too big", func(o *Options) { o.MetricsBindAddress = ":99999" }, "--metrics-bind-address"},
		{"metrics port not a number", func(o *Options) { o.MetricsBindAddress = ":http" }, "--metrics-bind-address"},
		{"metrics negative port", func(o *Options) { o.MetricsBindAddress = ":-1" }, "--metrics-bind-address"},
		{"metrics empty", func(o *Options) { o.MetricsBindAddress = "" }, "--metrics-bind-address"},
		{"metrics bad host", func(o *Options) { o.MetricsBindAddress = "bad_host!:8080" }, "--metrics-bind-address"},
		{"pprof on every interface", func(o *Options) { o.PprofBindAddress = ":6060" }, "--pprof-bind-address"},
		{"pprof not loopback", func(o *Options) { o.PprofBindAddress = "example.com:6060" }, "not a loopback address"},
		{"pprof no port", func(o *Options) { o.PprofBindAddress = "127.0.0.1" }, "--pprof-bind-address"},
		{"pprof any host", func(o *Options) { o.PprofBindAddress = "[::]:6060" }, "not a loopback address"},
		{"probe three colons", func(o *Options) { o.HealthProbeBindAddress = "a:b:c" }, "--health-probe-bind-address"},
		{"negative concurrency", func(o *Options) { o.Controller.MaxConcurrentReconciles = -1 }, "--max-concurrent-reconciles -1"},
		{"configmap name empty", func(o *Options) { o.Controller.ConfigMapName = "" }, "--bundle-configmap-name"},
		{"configmap name upper case", func(o *Options) { o.Controller.ConfigMapName = "Bundle" }, "--bundle-configmap-name"},
		{"configmap name slash", func(o *Options) { o.Controller.ConfigMapName = "a/b" }, "--bundle-configmap-name"},
		{"namespace upper case", func(o *Options) { o.Namespaces = []string{"team-a", "Team-B"} }, "--namespaces"},
		{"namespace with dot", func(o *Options) { o.Namespaces = []string{"a.b"} }, "--namespaces"},
		{"namespace empty", func(o *Options) { o.Namespaces = []string{"a", ""} }, "--namespaces"},
		{"namespace too long", func(o *Options) { o.Namespaces = []string{strings.Repeat("a", 64)} }, "--namespaces"},
		{"lease namespace", func(o *Options) { o.LeaderElectionNamespace = "kube_system" }, "--leader-election-namespace"},
		{"kubeconfig missing", func(o *Options) { o.Kubeconfig = missing }, "--kubeconfig"},
		{"webhook port", func(o *Options) { o.Webhooks.Port = 70000 }, "--webhook-port"},
		{"webhook cert mode", func(o *Options) { o.Webhooks.CertMode = "auto" }, `certificate mode "auto"`},
		{"webhook secret namespace", func(o *Options) { o.Webhooks.SecretNamespace = "Bad_NS" }, "--webhook-secret-namespace"},
		{"self mode outside a pod", func(o *Options) { o.Webhooks.SecretNamespace = "" }, "--enable-webhooks=false"},
		{"sidecar cpu", func(o *Options) { o.Webhooks.SidecarImage, o.Webhooks.SidecarCPU = "img", "lots" }, "--sidecar-cpu-request"},
		{"sidecar memory", func(o *Options) { o.Webhooks.SidecarImage, o.Webhooks.SidecarMemory = "img", "12 GB" }, "--sidecar-memory"},
		{"cluster name", func(o *Options) { o.Webhooks.SidecarImage, o.Webhooks.ClusterName = "img", "prod eu" }, "--cluster-name"},
		{"cluster name with a variable", func(o *Options) { o.Webhooks.SidecarImage, o.Webhooks.ClusterName = "img", "$(HOME)" }, "--cluster-name"},
		{"sidecar metrics port", func(o *Options) { o.Webhooks.SidecarImage, o.Webhooks.SidecarMetrics = "img", 70000 }, "--sidecar-metrics-port"},
		{"usage store with a password", func(o *Options) {
			o.Webhooks.SidecarImage, o.Webhooks.SidecarUsageStore = "img", "redis://u:pw@redis:6379/0"
		}, "--usage-store-password-file"},
		{"usage store not redis", func(o *Options) { o.Webhooks.SidecarImage, o.Webhooks.SidecarUsageStore = "img", "http://redis" }, "--sidecar-usage-store"},
		{"usage store with a variable", func(o *Options) {
			o.Webhooks.SidecarImage, o.Webhooks.SidecarUsageStore = "img", "redis://redis.$(NS).svc:6379/0"
		}, "--sidecar-usage-store"},
		{"usage store secret without a store", func(o *Options) {
			o.Webhooks.SidecarImage, o.Webhooks.SidecarUsageStoreSecret = "img", "redis-pw"
		}, "only used with --sidecar-usage-store"},
		{"usage store secret not a name", func(o *Options) {
			o.Webhooks.SidecarImage, o.Webhooks.SidecarUsageStore, o.Webhooks.SidecarUsageStoreSecret = "img", "redis://redis:6379/0", "Redis PW"
		}, "--sidecar-usage-store-password-secret"},
		{"negative sidecar metrics port", func(o *Options) { o.Webhooks.SidecarImage, o.Webhooks.SidecarMetrics = "img", -1 }, "--sidecar-metrics-port"},
		{"sidecar pull policy", func(o *Options) { o.Webhooks.SidecarImage, o.Webhooks.SidecarPullPolicy = "img", "Sometimes" }, "--sidecar-image-pull-policy"},
		{"sidecar as root", func(o *Options) { o.Webhooks.SidecarImage, o.Webhooks.SidecarUID = "img", 0 }, "--sidecar-uid"},
		{"negative sidecar uid", func(o *Options) { o.Webhooks.SidecarImage, o.Webhooks.SidecarUID = "img", -1 }, "--sidecar-uid"},
		{"sidecar uid too big", func(o *Options) { o.Webhooks.SidecarImage, o.Webhooks.SidecarUID = "img", 1<<40 }, "--sidecar-uid"},
		{"sidecar group root", func(o *Options) { o.Webhooks.SidecarImage, o.Webhooks.SidecarGID = "img", 0 }, "--sidecar-gid"},
		{"relative socket", func(o *Options) { o.Webhooks.SidecarImage, o.Webhooks.SidecarSocket = "img", "run/toolgate.sock" }, "--sidecar-socket"},
		{"socket with a variable", func(o *Options) { o.Webhooks.SidecarImage, o.Webhooks.SidecarSocket = "img", "/var/run/$(X)/tg.sock" }, "--sidecar-socket"},
		{"socket path not clean", func(o *Options) {
			o.Webhooks.SidecarImage, o.Webhooks.SidecarSocket = "img", "/var/run/../toolgate/tg.sock"
		}, "--sidecar-socket"},
		{"socket in /tmp", func(o *Options) { o.Webhooks.SidecarImage, o.Webhooks.SidecarSocket = "img", "/tmp/tg.sock" }, "--sidecar-socket"},
		{"socket beside the token", func(o *Options) {
			o.Webhooks.SidecarImage, o.Webhooks.SidecarSocket = "img", "/var/run/secrets/kubernetes.io/tg.sock"
		}, "--sidecar-socket"},
		{"socket in the cache", func(o *Options) {
			o.Webhooks.SidecarImage, o.Webhooks.SidecarSocket = "img", "/var/cache/toolgate/tg.sock"
		}, "--sidecar-socket"},
		{"socket path too long", func(o *Options) {
			o.Webhooks.SidecarImage, o.Webhooks.SidecarSocket = "img", "/var/run/toolgate/"+strings.Repeat("s", 100)+".sock"
		}, "--sidecar-socket"},
		{"neither socket nor port", func(o *Options) {
			o.Webhooks.SidecarImage, o.Webhooks.SidecarSocket, o.Webhooks.SidecarListen = "img", "", ""
		}, "--sidecar-socket"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := validDefaults()
			tt.edit(&o)
			err := o.Validate()
			if err == nil || !strings.Contains(err.Error(), tt.field) {
				t.Fatalf("Validate() = %v, want an error naming %s", err, tt.field)
			}
		})
	}
}

func TestValidateAcceptsGoodOptions(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, edit := range []func(*Options){
		func(*Options) {},
		func(o *Options) { o.MetricsBindAddress, o.HealthProbeBindAddress = "0", "0" },
		func(o *Options) { o.MetricsBindAddress = "127.0.0.1:9090" },
		func(o *Options) { o.MetricsBindAddress = "[::1]:9090" },
		func(o *Options) { o.HealthProbeBindAddress = "probe.local:0" },
		func(o *Options) { o.Namespaces = []string{"team-a", "team-b"} },
		func(o *Options) { o.LeaderElect, o.LeaderElectionNamespace = true, "toolgate-system" },
		func(o *Options) { o.Controller.ConfigMapName = "tools.bundle" },
		func(o *Options) { o.Kubeconfig = kubeconfig },
		func(o *Options) { o.Webhooks.Enabled, o.Webhooks.SecretNamespace = false, "" },
		func(o *Options) { o.Webhooks.CertMode, o.Webhooks.SecretNamespace = "provided", "" },
		func(o *Options) { o.Webhooks.SidecarImage = "ghcr.io/toolgate/toolgate:v0.1.0" },
		func(o *Options) { o.Webhooks.SidecarImage, o.Webhooks.ClusterName = "img", "prod-eu_1.b" },
		func(o *Options) { o.Webhooks.SidecarImage, o.Webhooks.SidecarMetrics = "img", 0 },
		func(o *Options) {
			o.Webhooks.SidecarImage, o.Webhooks.SidecarUsageStore, o.Webhooks.SidecarUsageStoreSecret = "img", "rediss://toolgate@redis.toolgate-system.svc:6380/2", "toolgate-redis"
		},
		func(o *Options) { o.Webhooks.SidecarImage, o.Webhooks.SidecarSocket = "img", "" },
		func(o *Options) { o.Webhooks.SidecarImage, o.Webhooks.SidecarListen = "img", "" },
		func(o *Options) {
			o.Webhooks.SidecarImage, o.Webhooks.SidecarSocket = "img", "/run/agent-gate/gate.sock"
		},
		func(o *Options) {
			o.Webhooks.SidecarImage, o.Webhooks.SidecarUID, o.Webhooks.SidecarGID = "img", 1234, 5678
		},
	} {
		o := validDefaults()
		edit(&o)
		if err := o.Validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	o := validDefaults()
	o.MetricsBindAddress, o.Controller.ConfigMapName, o.Namespaces = "x", "", []string{"A"}
	err := o.Validate()
	for _, flag := range []string{"--metrics-bind-address", "--bundle-configmap-name", "--namespaces"} {
		if err == nil || !strings.Contains(err.Error(), flag) {
			t.Errorf("error %v does not name %s", err, flag)
		}
	}
}

// The command must refuse bad flags before connecting to anything.
func TestCommandRejectsMalformedFlags(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--metrics-bind-address=8080"}, "--metrics-bind-address"},
		{[]string{"--health-probe-bind-address=:65536"}, "--health-probe-bind-address"},
		{[]string{"--bundle-configmap-name="}, "--bundle-configmap-name"},
		{[]string{"--namespaces=ok,Not_OK"}, "Not_OK"},
		{[]string{"--namespaces=a,,b"}, "empty namespace"},
		{[]string{"--leader-elect=maybe"}, "leader-elect"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
		{[]string{"extra-argument"}, "extra-argument"},
		{[]string{"--zap-log-level=chatty"}, "zap-log-level"},
	}
	for _, tt := range tests {
		cmd := NewCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(tt.args)
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want one naming %s", tt.args, err, tt.want)
		}
	}
}

func TestFlagsFillOptions(t *testing.T) {
	o := validDefaults()
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	o.AddFlags(fs)
	err := fs.Parse([]string{"--metrics-bind-address=0", "--health-probe-bind-address=127.0.0.1:9443",
		"--leader-elect", "--leader-election-namespace=toolgate-system", "--bundle-configmap-name=my-bundle",
		"--namespaces=team-a,team-b", "--kubeconfig=/tmp/kc"})
	if err != nil {
		t.Fatal(err)
	}
	if o.MetricsBindAddress != "0" || o.HealthProbeBindAddress != "127.0.0.1:9443" || !o.LeaderElect ||
		o.LeaderElectionNamespace != "toolgate-system" || o.Controller.ConfigMapName != "my-bundle" ||
		strings.Join(o.Namespaces, "|") != "team-a|team-b" || o.Kubeconfig != "/tmp/kc" {
		t.Fatalf("options %+v", o)
	}
	d := DefaultOptions()
	if d.MetricsBindAddress != ":8080" || d.HealthProbeBindAddress != ":8081" || d.Controller.ConfigMapName != "toolgate-bundle" ||
		d.LeaderElect || len(d.Namespaces) != 0 {
		t.Fatalf("defaults %+v", d)
	}
}

// validDefaults are the flag defaults as they are in a pod, where
// POD_NAMESPACE names the webhook Secret's namespace.
func validDefaults() Options {
	o := DefaultOptions()
	o.Webhooks.SecretNamespace = "toolgate-system"
	return o
}

// --max-exception-days: 30 by default, any day count from 1 to 3650
// accepted and passed to the PolicyException webhook; 0, negative or
// absurd counts refused at start-up, naming the flag and the range.
func TestMaxExceptionDaysFlag(t *testing.T) {
	if d := DefaultOptions(); d.Webhooks.MaxExceptionDays != 30 {
		t.Fatalf("default --max-exception-days %d, want 30", d.Webhooks.MaxExceptionDays)
	}
	for _, tt := range []struct {
		arg  string
		want string // "" accepted
	}{
		{"--max-exception-days=7", ""},
		{"--max-exception-days=3650", ""},
		{"--max-exception-days=0", "--max-exception-days: 0 is not a number of days from 1 to 3650"},
		{"--max-exception-days=-5", "--max-exception-days: -5 is not a number of days from 1 to 3650"},
		{"--max-exception-days=100000", "--max-exception-days: 100000 is not a number of days from 1 to 3650"},
		{"--max-exception-days=week", "invalid argument"},
	} {
		o := validDefaults()
		fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
		fs.SetOutput(&bytes.Buffer{})
		o.AddFlags(fs)
		err := fs.Parse([]string{tt.arg})
		if err == nil {
			err = o.Validate()
		}
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v", tt.arg, err)
		case tt.want == "" && o.Webhooks.MaxExceptionDays != mustAtoi(t, strings.TrimPrefix(tt.arg, "--max-exception-days=")):
			t.Errorf("%s: options carry %d", tt.arg, o.Webhooks.MaxExceptionDays)
		case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
			t.Errorf("%s: error %v, want one saying %q", tt.arg, err, tt.want)
		}
	}
	wo, err := validDefaults().Webhooks.setup("toolgate-bundle")
	if err != nil || wo.MaxExceptionDays != 30 {
		t.Errorf("webhook options carry %d days (%v), want 30", wo.MaxExceptionDays, err)
	}
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
