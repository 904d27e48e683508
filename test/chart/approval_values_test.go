package chart

import (
	"path"
	"strings"
	"testing"
)

// The approvals values reach the manager: the retention always (24h by
// default), the notify URL when set, and the auth Secret's key mounted
// read-only as the file the flag names.
func TestApprovalValuesReachTheManager(t *testing.T) {
	t.Parallel()
	d, c := managerDeployment(t)
	if v, _ := flagValue(c.Args, "approvals-retention"); v != "24h" {
		t.Errorf("--approvals-retention=%q, want the default 24h", v)
	}
	for _, f := range []string{"approvals-notify-url", "approvals-notify-auth-header-file"} {
		if v, ok := flagValue(c.Args, f); ok {
			t.Errorf("no approvals.notify set, yet --%s=%q", f, v)
		}
	}
	if n := len(d.Spec.Template.Spec.Volumes); n != 1 {
		t.Errorf("%d volumes by default, want only the webhook certificates", n)
	}

	d, c = managerDeployment(t, nonDefault...)
	for flag, want := range map[string]string{"approvals-retention": "90m",
		"approvals-notify-url": "https://hooks.example.com/toolgate?team=payments&env=prod"} {
		if v, _ := flagValue(c.Args, flag); v != want {
			t.Errorf("--%s=%q, want %q", flag, v, want)
		}
	}
	file, _ := flagValue(c.Args, "approvals-notify-auth-header-file")
	var mounted bool
	for _, m := range c.VolumeMounts {
		if m.Name == "approvals-notify-auth" && m.ReadOnly && path.Join(m.MountPath, "authorization") == file {
			mounted = true
		}
	}
	if !mounted {
		t.Errorf("--approvals-notify-auth-header-file=%q is not the mounted Secret key: mounts %+v", file, c.VolumeMounts)
	}
	var secret bool
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Name == "approvals-notify-auth" && v.Secret != nil && v.Secret.SecretName == "approvals-notify" &&
			len(v.Secret.Items) == 1 && v.Secret.Items[0].Key == "token" && v.Secret.Items[0].Path == "authorization" {
			secret = true
		}
	}
	if !secret {
		t.Errorf("no volume of Secret approvals-notify, key token as authorization: %+v", d.Spec.Template.Spec.Volumes)
	}
}

// Approvals values that cannot work fail the install, by the schema or by
// the template, naming the value.
func TestApprovalValueMistakesFailTheInstall(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"zero retention", []string{"--set", "approvals.retention=0s"}, "retention"},
		{"retention in days", []string{"--set", "approvals.retention=1d"}, "retention"},
		{"retention with a space", []string{"--set", "approvals.retention=1 h"}, "retention"},
		{"URL of another scheme", []string{"--set", "approvals.notify.url=ftp://hooks.example.com/x"}, "url"},
		{"URL without a scheme", []string{"--set", "approvals.notify.url=hooks.example.com/x"}, "url"},
		{"URL with credentials", []string{"--set", "approvals.notify.url=https://bot:pw@hooks.example.com/x"}, "url"},
		{"secret typo", []string{"--set", "approvals.notify.authSecret.nam=x"}, "nam"},
		{"secret name upper case", []string{"--set", "approvals.notify.url=https://h", "--set", "approvals.notify.authSecret.name=Notify",
			"--set", "approvals.notify.authSecret.key=k"}, "name"},
		{"secret without key", []string{"--set", "approvals.notify.url=https://h", "--set", "approvals.notify.authSecret.name=notify"},
			"needs approvals.notify.authSecret.key"},
		{"secret without URL", []string{"--set", "approvals.notify.authSecret.name=notify", "--set", "approvals.notify.authSecret.key=k"},
			"needs approvals.notify.url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out, err := helmTemplate(tc.args...)
			if err == nil {
				t.Fatalf("helm template %v succeeded:\n%.300s", tc.args, out)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("want an error naming %q, got: %v", tc.want, err)
			}
		})
	}
}
