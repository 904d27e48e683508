package manager

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/toolgate/toolgate/controllers"
)

// The approval flags fill Options: a retention, a notify URL and the file
// of its auth header; the default retention is 24h.
func TestApprovalFlagsFillOptions(t *testing.T) {
	if d := DefaultOptions(); d.Controller.Approvals.Retention != 24*time.Hour {
		t.Fatalf("default --approvals-retention %s, want 24h", d.Controller.Approvals.Retention)
	}
	o := validDefaults()
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	o.AddFlags(fs)
	err := fs.Parse([]string{"--approvals-retention=15m", "--approvals-notify-url=https://hooks.example.com/toolgate?team=a",
		"--approvals-notify-auth-header-file=/etc/toolgate/approvals-notify/auth"})
	if err != nil {
		t.Fatal(err)
	}
	a := o.Controller.Approvals
	if a.Retention != 15*time.Minute || a.NotifyURL != "https://hooks.example.com/toolgate?team=a" ||
		a.NotifyAuthHeaderFile != "/etc/toolgate/approvals-notify/auth" {
		t.Fatalf("approval options %+v", a)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}

// Each bad approval flag stops `toolgate manager` before it connects to
// anything, with an error naming the flag.
func TestCommandRejectsBadApprovalFlags(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--approvals-notify-url=ftp://hooks.example.com/x"}, "--approvals-notify-url"},
		{[]string{"--approvals-notify-url=hooks.example.com/x"}, "--approvals-notify-url"},
		{[]string{"--approvals-notify-url=http://"}, "has no host"},
		{[]string{"--approvals-notify-url=http://%zz"}, "does not parse"},
		{[]string{"--approvals-notify-url=https://bot:secret@hooks.example.com/x"}, "auth header file"},
		{[]string{"--approvals-notify-auth-header-file=/etc/auth"}, "needs --approvals-notify-url"},
		{[]string{"--approvals-retention=0"}, "approvals-retention"},
		{[]string{"--approvals-retention=-1h"}, "approvals-retention"},
		{[]string{"--approvals-retention=1 day"}, "approvals-retention"},
	} {
		cmd := NewCommand()
		var out bytes.Buffer
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		cmd.SetArgs(append([]string{"--enable-webhooks=false"}, tt.args...))
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%v: error %v, want one naming %s", tt.args, err, tt.want)
		}
	}
}

// A malformed notify URL, or an auth header file that is missing, empty
// or of several lines, stops the manager at start with the reason: Run
// returns it instead of running without notices.
func TestManagerRefusesToStartWithBadNotifySettings(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("good", "Bearer s3cret\n")
	for _, tt := range []struct {
		name string
		a    controllers.ApprovalOptions
		want string
	}{
		{"malformed URL", controllers.ApprovalOptions{NotifyURL: "http//hooks.example.com"}, "--approvals-notify-url"},
		{"missing auth file", controllers.ApprovalOptions{NotifyURL: "http://127.0.0.1:1/", NotifyAuthHeaderFile: filepath.Join(dir, "nope")}, "no such file"},
		{"empty auth file", controllers.ApprovalOptions{NotifyURL: "http://127.0.0.1:1/", NotifyAuthHeaderFile: write("empty", "\n")}, "is empty"},
		{"two-line auth file", controllers.ApprovalOptions{NotifyURL: "http://127.0.0.1:1/", NotifyAuthHeaderFile: write("two", "Bearer a\nX-Other: b\n")}, "more than one line"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions()
			o.Controller.Approvals = tt.a
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			o.Kubeconfig = write("kubeconfig", string(kubeconfig))
			err := Run(ctx, o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Run = %v, want an error naming %q", err, tt.want)
			}
		})
	}
	// And with the good file the same manager starts and runs.
	o := testOptions()
	o.Controller.Approvals = controllers.ApprovalOptions{NotifyURL: "http://127.0.0.1:1/", NotifyAuthHeaderFile: good}
	o.Kubeconfig = write("kubeconfig", string(kubeconfig))
	stop := runInBackground(t, o)
	time.Sleep(2 * time.Second)
	if err := stop(); err != nil {
		t.Fatalf("manager with a good auth header file stopped with %v", err)
	}
}
