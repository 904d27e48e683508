package sidecar

import (
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestMalformedFlagsAreRejectedClearly(t *testing.T) {
	file := "--bundle-file=" + filepath.Join(t.TempDir(), "bundle.json")
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"no source", nil, "one bundle source is required"},
		{"two sources", []string{file, "--bundle-dir=/tmp"}, "exclusive"},
		{"three sources", []string{file, "--bundle-dir=/tmp", "--configmap=a/b"}, "exclusive"},
		{"listen without port", []string{file, "--listen=localhost"}, "--listen"},
		{"listen port too big", []string{file, "--listen=127.0.0.1:99999"}, "port"},
		{"listen port not a number", []string{file, "--listen=127.0.0.1:http"}, "port"},
		{"listen bad host", []string{file, "--listen=bad_host!:80"}, "host"},
		{"listen empty unix path", []string{file, "--listen=unix:"}, "socket path"},
		{"listen unix URL with a host", []string{file, "--listen=unix://host/run/toolgate.sock"}, "names a host"},
		{"listen unix URL without a path", []string{file, "--listen=unix://"}, "names a host"},
		{"listen socket path too long", []string{file, "--listen=unix:/" + strings.Repeat("s", 120)}, "more than the 107"},
		{"listen the same socket twice", []string{file, "--listen=unix:/run/tg.sock", "--listen=unix:///run/tg.sock"}, "given twice"},
		{"listen the same port twice", []string{file, "--listen=127.0.0.1:8181", "--listen=127.0.0.1:8181"}, "given twice"},
		{"listen one good one bad", []string{file, "--listen=unix:/run/tg.sock", "--listen=8181"}, "--listen"},
		{"metrics on a decision socket", []string{file, "--listen=unix:/run/tg.sock", "--metrics-listen=unix:/run/tg.sock"}, "must differ"},
		{"zero connections", []string{file, "--max-connections=0"}, "--max-connections must be from 1"},
		{"negative connections", []string{file, "--max-connections=-5"}, "--max-connections"},
		{"connections not a number", []string{file, "--max-connections=lots"}, "invalid argument"},
		{"huge connections", []string{file, "--max-connections=100000000"}, "--max-connections"},
		{"zero metrics connections", []string{file, "--metrics-max-connections=0"}, "--metrics-max-connections"},
		{"zero MCP connections", []string{file, "--max-mcp-connections=0"}, "--max-mcp-connections must be from 1"},
		{"zero header timeout", []string{file, "--read-header-timeout=0s"}, "--read-header-timeout must be positive"},
		{"negative read timeout", []string{file, "--read-timeout=-1s"}, "--read-timeout"},
		{"day-long write timeout", []string{file, "--write-timeout=24h"}, "--write-timeout"},
		{"zero idle timeout", []string{file, "--idle-timeout=0"}, "--idle-timeout"},
		{"timeout without a unit", []string{file, "--read-timeout=5"}, "invalid argument"},
		{"header timeout above the read timeout", []string{file, "--read-header-timeout=10s", "--read-timeout=5s"}, "must not exceed --read-timeout"},
		{"zero evaluations", []string{file, "--max-evaluations=0"}, "--max-evaluations"},
		{"zero body bytes in flight", []string{file, "--max-body-bytes-in-flight=0"}, "--max-body-bytes-in-flight must be from 1048576"},
		{"body bytes in flight below one body", []string{file, "--max-body-bytes-in-flight=1048575"}, "--max-body-bytes-in-flight must be from 1048576"},
		{"negative body bytes in flight", []string{file, "--max-body-bytes-in-flight=-1"}, "--max-body-bytes-in-flight"},
		{"huge body bytes in flight", []string{file, "--max-body-bytes-in-flight=2147483648"}, "--max-body-bytes-in-flight"},
		{"body bytes in flight with a unit", []string{file, "--max-body-bytes-in-flight=16Mi"}, "invalid argument"},
		{"zero result bytes", []string{file, "--max-result-bytes=0"}, "--max-result-bytes must be from 1024 to 1073741824, not 0"},
		{"negative result bytes", []string{file, "--max-result-bytes=-1"}, "--max-result-bytes must be from 1024"},
		{"result bytes below 1 KiB", []string{file, "--max-result-bytes=1023"}, "--max-result-bytes must be from 1024"},
		{"huge result bytes", []string{file, "--max-result-bytes=2147483648"}, "--max-result-bytes"},
		{"result bytes with a unit", []string{file, "--max-result-bytes=4Mi"}, "invalid argument"},
		{"result bytes not a number", []string{file, "--max-result-bytes=lots"}, "invalid argument"},
		{"zero request elements", []string{file, "--max-request-elements=0"}, "--max-request-elements"},
		{"request elements beyond the body limit", []string{file, "--max-request-elements=2000000"}, "--max-request-elements"},
		{"zero trace", []string{file, "--max-trace=0"}, "--max-trace"},
		{"tiny decision log bytes", []string{file, "--decision-log-queue-bytes=1000"}, "--decision-log-queue-bytes must be from 65536"},
		{"huge decision log bytes", []string{file, "--decision-log-queue-bytes=4000000000"}, "--decision-log-queue-bytes"},
		{"configmap without slash", []string{"--configmap=bundle"}, "NAMESPACE/NAME"},
		{"configmap without namespace", []string{"--configmap=/bundle"}, "NAMESPACE/NAME"},
		{"configmap without name", []string{"--configmap=team/"}, "NAMESPACE/NAME"},
		{"configmap with two slashes", []string{"--configmap=team/a/b"}, "NAMESPACE/NAME"},
		{"configmap bad namespace", []string{"--configmap=Team_A/bundle"}, "namespace"},
		{"configmap bad name", []string{"--configmap=team/Bundle!"}, "name"},
		{"kubeconfig without configmap", []string{file, "--kubeconfig=/x"}, "--kubeconfig is only used with --configmap"},
		{"url with a bad scheme", []string{file, "--decision-log-url=ftp://logs/x"}, "scheme"},
		{"url without host", []string{file, "--decision-log-url=http://"}, "no host"},
		{"url unparsable", []string{file, "--decision-log-url=http://[::1"}, "--decision-log-url"},
		{"decision log to a file", []string{file, "--decision-log=/var/log/x"}, "--decision-log must be"},
		{"token file without a url", []string{file, "--decision-log-token-file=/var/run/token"}, "--decision-log-token-file needs --decision-log-url"},
		{"queue of zero", []string{file, "--decision-log-queue=0"}, "--decision-log-queue"},
		{"negative batch", []string{file, "--decision-log-batch=-1"}, "--decision-log-batch"},
		{"huge queue", []string{file, "--decision-log-queue=2000000000"}, "--decision-log-queue"},
		{"zero flush interval", []string{file, "--decision-log-flush-interval=0s"}, "--decision-log-flush-interval"},
		{"zero poll interval", []string{file, "--poll-interval=0s"}, "--poll-interval"},
		{"unparsable duration", []string{file, "--poll-interval=soon"}, "invalid argument"},
		{"log field with an empty segment", []string{file, "--log-fields=input..command"}, "empty segment"},
		{"log field star inside a path", []string{file, "--log-fields=input.*"}, "stand alone"},
		{"redact everything", []string{file, "--redact=*"}, "whole request"},
		{"redact star in the middle", []string{file, "--redact=input.*.x"}, "last segment"},
		{"log label without =", []string{file, "--decision-log-label=cluster"}, "not KEY=VALUE"},
		{"log label empty key", []string{file, "--decision-log-label==prod"}, "key"},
		{"log label bad key", []string{file, "--decision-log-label=clu ster=prod"}, "must start with a letter"},
		{"log label key twice", []string{file, "--decision-log-label=a=1", "--decision-log-label=a=2"}, "given twice"},
		{"log label huge value", []string{file, "--decision-log-label=a=" + strings.Repeat("v", 1025)}, "more than 1024"},
		{"log label not UTF-8", []string{file, "--decision-log-label=a=\xff"}, "not UTF-8"},
		{"agent id too long", []string{file, "--agent-id=" + strings.Repeat("a", 254)}, "--agent-id"},
		{"an empty role", []string{file, "--roles=ci,,builder"}, "role 2 of \"ci,,builder\": a name is empty"},
		{"a trailing comma", []string{file, "--roles=ci,"}, "role 2"},
		{"a role with a space", []string{file, "--roles=ci, builder"}, "may hold only letters"},
		{"a role kubelet would expand", []string{file, "--roles=$(POD_NAME)"}, "may hold only letters"},
		{"a huge role", []string{file, "--roles=" + strings.Repeat("r", 254)}, "more than 253"},
		{"too many roles", []string{file, "--roles=" + strings.Repeat("r,", 64) + "r"}, "65 roles, more than 64"},
		{"an environment with a comma", []string{file, "--environment=prod,dev"}, "--environment"},
		{"an environment with a newline", []string{file, "--environment=prod\n"}, "may hold only letters"},
		{"zero usage keys", []string{file, "--usage-max-keys=0"}, "--usage-max-keys must be from 4"},
		{"huge usage keys", []string{file, "--usage-max-keys=2000000"}, "--usage-max-keys"},
		{"no pending approvals", []string{file, "--approvals-max-pending=0"}, "--approvals-max-pending 0: must be from 1 to 1000"},
		{"too many pending approvals", []string{file, "--approvals-max-pending=1001"}, "--approvals-max-pending 1001: must be from 1 to 1000"},
		{"pending approvals not a number", []string{file, "--approvals-max-pending=many"}, "--approvals-max-pending"},
		{"one event per key", []string{file, "--usage-max-events-per-key=1"}, "--usage-max-events-per-key must be from 2"},
		{"usage events not a number", []string{file, "--usage-max-events-per-key=many"}, "invalid argument"},
		{"unknown flag", []string{file, "--bundle=x"}, "unknown flag"},
		{"positional argument", []string{file, "extra"}, "unknown command"},
		{"missing kubeconfig file", []string{"--configmap=team/bundle", "--kubeconfig=" + filepath.Join(t.TempDir(), "nope")}, "API access"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cmd := NewCommand("test")
			cmd.SetArgs(tc.args)
			cmd.SetOut(io.Discard)
			cmd.SetErr(io.Discard)
			err := cmd.Execute()
			if err == nil {
				t.Fatalf("%v: accepted", tc.args)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v: error %q does not mention %q", tc.args, err, tc.want)
			}
		})
	}
}

func TestValidateReportsEveryProblemAtOnce(t *testing.T) {
	o := DefaultOptions()
	o.Listen, o.DecisionLog = []string{"nowhere"}, "syslog"
	err := o.Validate()
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"bundle source", "--listen", "--decision-log"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not mention %q", err, want)
		}
	}
}

func TestWellFormedFlagsValidate(t *testing.T) {
	for _, args := range [][]string{
		{"--bundle-file=/etc/toolgate/bundle.json"},
		{"--bundle-dir=/etc/toolgate", "--listen=unix:/run/toolgate.sock", "--agent-id=agent-1"},
		{"--configmap=team-a/toolgate-bundle", "--kubeconfig=/x", "--listen=[::1]:8181", "--cache-dir=/var/cache"},
		{"--bundle-file=b.json.gz", "--listen=:0", "--decision-log=none", "--decision-log-url=https://logs.example:8443/v1",
			"--log-fields=*", "--redact=input.*,kwargs.token"},
		{"--bundle-file=b.json", "--log-fields=input.command,kwargs"},
		{"--bundle-file=b.json", "--decision-log-url=http://toolgate-reports.toolgate-system.svc:8090/v1/decisions", "--decision-log-token-file=/var/run/secrets/toolgate/reports/token"},
		// As injected: the socket and the loopback port, both.
		{"--bundle-file=b.json", "--listen=unix:///var/run/toolgate/toolgate.sock", "--listen=127.0.0.1:8181", "--metrics-listen=:9191"},
		{"--bundle-file=b.json", "--listen=:0", "--listen=:0", "--max-connections=1", "--max-evaluations=100000",
			"--read-header-timeout=1s", "--read-timeout=1s", "--write-timeout=1h", "--idle-timeout=1ms",
			"--max-request-elements=1", "--max-trace=1", "--decision-log-queue-bytes=65536"},
		{"--bundle-file=b.json", "--max-body-bytes-in-flight=1048576"},
		{"--bundle-file=b.json", "--max-result-bytes=1024"},
		{"--bundle-file=b.json", "--max-result-bytes=1073741824"},
		{"--bundle-file=b.json", "--roles=ci,analyst:eu,team/a@x.y_z-1", "--environment=prod", "--usage-max-keys=4", "--usage-max-events-per-key=2", "--usage-state=/var/cache/toolgate/usage", "--approvals-max-pending=1"},
		{"--bundle-file=b.json", "--roles=", "--usage-max-keys=1048576", "--usage-max-events-per-key=1048576"},
		{"--bundle-file=b.json", "--max-body-bytes-in-flight=1073741824"},
	} {
		o := DefaultOptions()
		fs := pflag.NewFlagSet("sidecar", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if err := o.Validate(); err != nil {
			t.Errorf("%v: %v", args, err)
		}
	}
}

// --roles unset leaves a request's roles alone (nil); --roles= binds none.
func TestRolesFlagTellsUnsetFromEmpty(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{{nil, nil}, {[]string{"--roles="}, []string{}}, {[]string{"--roles=ci,analyst"}, []string{"ci", "analyst"}}} {
		o := DefaultOptions()
		fs := pflag.NewFlagSet("sidecar", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if (o.Roles == nil) != (tc.want == nil) || !slices.Equal(o.Roles, tc.want) {
			t.Errorf("%v: roles %#v, want %#v", tc.args, o.Roles, tc.want)
		}
		if got := fs.Lookup("roles").Value.String(); got != strings.Join(tc.want, ",") {
			t.Errorf("%v: the flag prints %q", tc.args, got)
		}
	}
}

func TestValidateChecksRolesSetDirectly(t *testing.T) {
	o := DefaultOptions()
	o.BundleFile, o.Roles, o.Environment = "b.json", []string{"ci", "bad role"}, "p rod"
	err := o.Validate()
	if err == nil || !strings.Contains(err.Error(), "--roles") || !strings.Contains(err.Error(), "--environment") {
		t.Errorf("Validate: %v, want --roles and --environment refused", err)
	}
}
