package sidecar

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// The shared usage store's flags: each malformed value is refused at start
// with an error naming its flag and what to write instead.
func TestMalformedUsageStoreFlagsAreRejectedClearly(t *testing.T) {
	file, ns := "--bundle-file=/etc/toolgate/bundle.json", "--bundle-namespace=agents"
	t.Setenv("POD_NAMESPACE", "")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a password in the URL", []string{file, ns, "--usage-store=redis://user:secret@localhost:6379/0"}, "put the password in a file: --usage-store-password-file"},
		{"an empty password in the URL", []string{file, ns, "--usage-store=redis://:@localhost:6379/0"}, "--usage-store-password-file"},
		{"an http URL", []string{file, ns, "--usage-store=http://localhost:6379"}, "want redis:// or rediss://"},
		{"a bare host", []string{file, ns, "--usage-store=localhost:6379"}, "--usage-store"},
		{"no host", []string{file, ns, "--usage-store=redis:///0"}, "no host"},
		{"a port out of range", []string{file, ns, "--usage-store=redis://localhost:70000/0"}, "port \"70000\""},
		{"a database that is not a number", []string{file, ns, "--usage-store=redis://localhost:6379/counts"}, "is not a number"},
		{"a negative database", []string{file, ns, "--usage-store=redis://localhost:6379/-1"}, "is not a number"},
		{"a query", []string{file, ns, "--usage-store=redis://localhost:6379/0?password=x"}, "query parameters are not supported"},
		{"unparsable", []string{file, ns, "--usage-store=redis://[::1"}, "not a URL"},
		{"unparsable with a password", []string{file, ns, "--usage-store=redis://u:secret@[::1"}, "not a URL"},
		{"a password in an http URL", []string{file, ns, "--usage-store=http://u:secret@localhost:6379"}, "unknown scheme"},
		{"a password file without a store", []string{file, "--usage-store-password-file=/run/pw"}, "--usage-store-password-file is only used with --usage-store"},
		{"a CA without a store", []string{file, "--usage-store-ca-file=/run/ca.pem"}, "--usage-store-ca-file is only used with --usage-store"},
		{"a CA without TLS", []string{file, ns, "--usage-store=redis://localhost:6379/0", "--usage-store-ca-file=/run/ca.pem"}, "only used with a rediss://"},
		{"a zero timeout", []string{file, "--usage-store-timeout=0s"}, "--usage-store-timeout must be positive"},
		{"a negative timeout", []string{file, "--usage-store-timeout=-1ms"}, "--usage-store-timeout must be positive"},
		{"a minute-long timeout", []string{file, "--usage-store-timeout=1m"}, "at most 10s"},
		{"a timeout without a unit", []string{file, "--usage-store-timeout=50"}, "invalid argument"},
		{"an empty cluster name", []string{file, "--cluster-name="}, "--cluster-name must not be empty"},
		{"a cluster name with a space", []string{file, "--cluster-name=prod eu"}, "--cluster-name \"prod eu\""},
		{"a cluster name kubelet would expand", []string{file, "--cluster-name=$(HOME)"}, "--cluster-name"},
		{"a cluster name too long", []string{file, "--cluster-name=" + strings.Repeat("c", 64)}, "--cluster-name"},
		{"no namespace to count in", []string{file, "--usage-store=redis://localhost:6379/0"}, "--usage-store needs the namespace"},
	} {
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
			if strings.Contains(err.Error(), "secret") {
				t.Errorf("%v: the error repeats the password: %q", tc.args, err)
			}
		})
	}
}

func TestWellFormedUsageStoreFlagsValidate(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		podNS string
	}{
		{args: []string{"--configmap=agents/toolgate-bundle", "--usage-store=redis://localhost:6379/0"}},
		{args: []string{"--configmap=agents/toolgate-bundle", "--usage-store=redis://localhost", "--cluster-name=prod-eu_1.b", "--usage-store-timeout=10s"}},
		{args: []string{"--bundle-file=b.json", "--bundle-namespace=agents", "--usage-store=rediss://toolgate@localhost:6380/15",
			"--usage-store-password-file=/run/pw", "--usage-store-ca-file=/run/ca.pem", "--usage-store-timeout=1ms"}},
		{args: []string{"--bundle-file=b.json", "--usage-store=redis://[::1]:6379/3"}, podNS: "agents"},
	} {
		t.Setenv("POD_NAMESPACE", tc.podNS)
		o := DefaultOptions()
		fs := pflag.NewFlagSet("sidecar", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if err := o.Validate(); err != nil {
			t.Errorf("%v: %v", tc.args, err)
		}
	}
}
