package sidecar

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/internal/httploop"
)

// probePaths are what `toolgate sidecar probe` may ask for.
var probePaths = map[string]string{"alive": "/healthz", "ready": "/readyz"}

// newProbeCommand returns `toolgate sidecar probe`. The sidecar answers on
// the Pod's loopback (or a Unix socket), which kubelet's HTTP probes cannot
// reach, so the injected container probes itself with this exec command;
// the image is distroless and has no curl.
func newProbeCommand() *cobra.Command {
	listen := DefaultOptions().Listen[0]
	timeout := 2 * time.Second
	cmd := &cobra.Command{
		Use:   "probe alive|ready",
		Short: "Exit 0 when the sidecar on --listen is alive (serving) or ready (a bundle is loaded)",
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) != 1 || probePaths[args[0]] == "" {
				return fmt.Errorf("probe takes one argument, alive or ready, not %q", strings.Join(args, " "))
			}
			return nil
		},
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := httploop.CheckAddr(listen); err != nil {
				return fmt.Errorf("--listen: %w", err)
			}
			if timeout <= 0 {
				return fmt.Errorf("--timeout must be positive, not %v", timeout)
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			body, err := Probe(ctx, listen, args[0])
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), body)
			return err
		},
	}
	cmd.Flags().StringVar(&listen, "listen", listen, "one of the sidecar's --listen addresses: host:port, or unix:/path (also unix:///path)")
	cmd.Flags().DurationVar(&timeout, "timeout", timeout, "give up after this long")
	return cmd
}

// Probe asks the sidecar listening on listen whether it is alive or ready,
// and returns its answer; an error says why not.
func Probe(ctx context.Context, listen, which string) (string, error) {
	path := probePaths[which]
	if path == "" {
		return "", fmt.Errorf("unknown probe %q: use alive or ready", which)
	}
	host := listen
	dial := (&net.Dialer{}).DialContext
	sock, isUnix, err := socketPath(listen)
	if err != nil {
		return "", err
	}
	if isUnix {
		host = "sidecar"
		dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}
	} else if h, p, err := net.SplitHostPort(listen); err == nil && (h == "" || h == "0.0.0.0" || h == "::") {
		host = net.JoinHostPort("127.0.0.1", p) // a wildcard listener answers on loopback
	}
	client := &http.Client{Transport: &http.Transport{DialContext: dial, DisableKeepAlives: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+host+path, nil)
	if err != nil {
		return "", err
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", fmt.Errorf("sidecar on %s is not answering: %w", listen, unwrapURLError(err))
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	answer := strings.TrimSpace(string(b))
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("sidecar on %s is not %s: %s %s", listen, which, resp.Status, answer)
	}
	return answer, nil
}

// unwrapURLError drops net/http's "Get \"http://...\":" prefix, which
// names a URL the user never typed.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
