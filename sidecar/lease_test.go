package sidecar

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

// TestLeaseFlagsRefuseMalformedInput: --lease-pod and --lease-pod-uid come
// together, name a Pod and its UID, and only with --configmap (a sidecar
// reading a file cannot reach the API); each mistake says which flag and
// what is wanted.
func TestLeaseFlagsRefuseMalformedInput(t *testing.T) {
	const uid = "0b7c2c0e-5f7a-4d3e-9a55-2f1c3b4d5e6f"
	cm := "--configmap=team/toolgate-bundle"
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"pod without uid", []string{cm, "--lease-pod=agent-0"}, "--lease-pod needs --lease-pod-uid"},
		{"uid without pod", []string{cm, "--lease-pod-uid=" + uid}, "--lease-pod-uid needs --lease-pod"},
		{"pod name with a capital", []string{cm, "--lease-pod=Agent-0", "--lease-pod-uid=" + uid}, `--lease-pod "Agent-0" is not a Pod name`},
		{"pod name with a slash", []string{cm, "--lease-pod=team/agent-0", "--lease-pod-uid=" + uid}, "is not a Pod name"},
		{"pod name unexpanded", []string{cm, "--lease-pod=$(POD_NAME)", "--lease-pod-uid=" + uid}, "is not a Pod name"},
		{"pod name too long", []string{cm, "--lease-pod=" + strings.Repeat("a", 254), "--lease-pod-uid=" + uid}, "is not a Pod name"},
		{"uid too short", []string{cm, "--lease-pod=agent-0", "--lease-pod-uid=0b7c2c0e"}, `--lease-pod-uid "0b7c2c0e" is not a Pod UID`},
		{"uid unexpanded", []string{cm, "--lease-pod=agent-0", "--lease-pod-uid=$(POD_UID)"}, "is not a Pod UID"},
		{"uid not hex", []string{cm, "--lease-pod=agent-0", "--lease-pod-uid=" + strings.Replace(uid, "0b", "zz", 1)}, "is not a Pod UID"},
		{"uid dashes misplaced", []string{cm, "--lease-pod=agent-0", "--lease-pod-uid=" + uid[:7] + "-" + uid[7:8] + uid[9:]}, "is not a Pod UID"},
		{"both wrong at once", []string{cm, "--lease-pod=A", "--lease-pod-uid=x"}, "is not a Pod name"},
		{"with a bundle file", []string{"--bundle-file=/tmp/bundle.json", "--lease-pod=agent-0", "--lease-pod-uid=" + uid}, "--lease-pod is only used with --configmap"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("sidecar", pflag.ContinueOnError)
			fs.SetOutput(io.Discard)
			opts := DefaultOptions()
			opts.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatalf("parsing %v: %v", tc.args, err)
			}
			err := opts.validateSource()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v: %v, want an error containing %q", tc.args, err, tc.want)
			}
			if tc.name == "both wrong at once" && !strings.Contains(err.Error(), "is not a Pod UID") {
				t.Errorf("only the first problem reported: %v", err)
			}
		})
	}
	opts := DefaultOptions()
	opts.ConfigMap, opts.LeasePod, opts.LeasePodUID = "team/toolgate-bundle", "agent-7f9c-x2", uid
	if err := opts.validateSource(); err != nil {
		t.Errorf("a Pod name and UID as the downward API gives them: %v", err)
	}
}
