package sidecar

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/mcptest"
)

// Issue 24 §3, held streams: MCP streams the agent opens on the Unix socket
// used to take the connection slots that /v1/evaluate and the liveness
// probe (which kubelet runs over that socket) need, so the probe failed,
// kubelet restarted the sidecar, and in-memory counters started from zero.

// mcpSession initializes an MCP session (2025-11-25, stateful) through the
// proxy at url with c and returns its id.
func mcpSession(c *http.Client, url string) (string, error) {
	post := func(body, session string) (*http.Response, error) {
		req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
		if err != nil {
			return nil, err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
		}
		resp, err := c.Do(req)
		if err != nil {
			return nil, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		return resp, nil
	}
	resp, err := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"held-streams","version":"1"}}}`, "")
	if err != nil {
		return "", err
	}
	session := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || session == "" {
		return "", fmt.Errorf("initialize: %s, session %q", resp.Status, session)
	}
	if resp, err = post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`, session); err != nil {
		return "", err
	} else if resp.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("notifications/initialized: %s", resp.Status)
	}
	return session, nil
}

// openGETStream opens the session's standalone SSE stream (GET, Accept:
// text/event-stream) on a connection of its own and returns its body, held
// open: the upstream answered and keeps it.
func openGETStream(c *http.Client, url, session string) (io.ReadCloser, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		_ = resp.Body.Close()
		return nil, fmt.Errorf("GET stream: %s %s", resp.Status, data)
	}
	return resp.Body, nil
}

// openPOSTStream calls the server's stream tool in the session: it answers
// with an event stream, sends a progress notification at once, then waits
// (for POST /release, or 30 s). The body is returned held open once the
// notification arrived.
func openPOSTStream(c *http.Client, url, session string, token int) (io.ReadCloser, error) {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"stream","arguments":{"note":"held"},"_meta":{"progressToken":%d}}}`, token, token)
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 4096)
	n, err := resp.Body.Read(buf)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(buf[:n]), "notifications/progress") {
		_ = resp.Body.Close()
		return nil, fmt.Errorf("POST stream: %s %q %v", resp.Status, buf[:n], err)
	}
	return resp.Body, nil
}

// latencies times n calls of f, each on a connection of its own (what a
// probe, or a client without keep-alive, does), and returns them sorted;
// failures are returned apart.
func latencies(n int, f func() error) (sorted []time.Duration, failures []error) {
	for range n {
		start := time.Now()
		if err := f(); err != nil {
			failures = append(failures, err)
			continue
		}
		sorted = append(sorted, time.Since(start))
	}
	slices.Sort(sorted)
	return sorted, failures
}

func p99(sorted []time.Duration) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*99/100)]
}

// rssKiB is a process's resident memory.
func rssKiB(pid int) int {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kib int
			_, _ = fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(v), " kB"), &kib)
			return kib
		}
	}
	return -1
}

// TestHeldStreamsLeaveDecisionsAndProbesTheirCapacity holds 1,000 MCP
// streams on the sidecar's Unix socket, against the real MCP server
// (official Go SDK): 900 GET streams (each a session's standalone stream)
// and 100 POSTs answered as event streams (its stream tool, which holds
// them), and times /v1/evaluate and the liveness probe
// (`toolgate sidecar probe alive`'s own code, Probe), each on a new
// connection, before and while they are held: every one must answer, at a
// p99 within 3x + 5 ms of the idle one. The sidecar is its own process with
// default limits but --max-mcp-connections, raised to hold 1,000.
func TestHeldStreamsLeaveDecisionsAndProbesTheirCapacity(t *testing.T) {
	const streams, samples = 1000, 1000
	up := startMCPServer(t)
	p := startSidecarProc(t, "--bundle-file="+writeBundleFile(t, mcptest.Bundle()), "--agent-id="+mcpAgent, "--decision-log=none",
		"--mcp-listen=127.0.0.1:0", "--mcp-upstream=pay="+up.endpoint("2025-11-25"), "--max-mcp-connections=1024")
	newConn := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", p.sock)
		}}}
	decide := func() error {
		resp, err := newConn.Post("http://sidecar/v1/evaluate", "application/json", strings.NewReader(`{"tool_name":"pay","input":{"amount":5}}`))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var d struct{ Decision string }
		if err := json.NewDecoder(resp.Body).Decode(&d); err != nil || d.Decision != "allow" {
			return fmt.Errorf("%s: decision %q, %v", resp.Status, d.Decision, err)
		}
		return nil
	}
	probe := func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second) // the injected probe's --timeout
		defer cancel()
		_, err := Probe(ctx, "unix:"+p.sock, "alive")
		return err
	}
	measure := func(state string) (decisions, probes time.Duration) {
		t.Helper()
		d, dFail := latencies(samples, decide)
		pr, pFail := latencies(samples, probe)
		if len(dFail)+len(pFail) > 0 {
			t.Fatalf("%s: %d of %d decisions and %d of %d probes failed; the first: %v", state, len(dFail), samples, len(pFail), samples, append(dFail, pFail...)[0])
		}
		t.Logf("%s: /v1/evaluate p50 %v p99 %v, probe p50 %v p99 %v; sidecar RSS %d KiB",
			state, d[len(d)/2], p99(d), pr[len(pr)/2], p99(pr), rssKiB(p.cmd.Process.Pid))
		return p99(d), p99(pr)
	}
	idleDecisions, idleProbes := measure("no streams")

	// The agent opens its streams as fast as it can, sixteen at a time.
	keepAlive := unixClient(p.sock)
	keepAlive.Timeout = 0
	url := "http://sidecar/mcp/pay"
	var (
		mu     sync.Mutex
		held   []io.ReadCloser
		failed []error
		next   atomic.Int64
		wg     sync.WaitGroup
	)
	t.Cleanup(func() {
		for _, b := range held {
			_ = b.Close()
		}
	})
	calls, err := mcpSession(keepAlive, url)
	if err != nil {
		t.Fatal(err)
	}
	for range 16 {
		wg.Go(func() {
			for i := next.Add(1); i <= streams; i = next.Add(1) {
				var body io.ReadCloser
				session, err := calls, error(nil)
				if i > 100 {
					session, err = mcpSession(keepAlive, url)
				}
				switch {
				case err != nil:
				case i <= 100:
					body, err = openPOSTStream(keepAlive, url, session, int(i))
				default:
					body, err = openGETStream(keepAlive, url, session)
				}
				mu.Lock()
				if err != nil {
					failed = append(failed, err)
				} else {
					held = append(held, body)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(failed) > 0 {
		t.Errorf("%d of %d streams held; %d failed, the first: %v", len(held), streams, len(failed), failed[0])
	}
	heldDecisions, heldProbes := measure(fmt.Sprintf("%d streams held", len(held)))
	for _, c := range []struct {
		what       string
		idle, held time.Duration
	}{{"/v1/evaluate", idleDecisions, heldDecisions}, {"the liveness probe", idleProbes, heldProbes}} {
		if bound := 3*c.idle + 5*time.Millisecond; c.held > bound {
			t.Errorf("%s: p99 %v with %d streams held, over 3x + 5 ms of its idle p99 %v", c.what, c.held, streams, c.idle)
		}
	}
	// They were held throughout, in the MCP connections' own budget.
	_, metrics := getOver(t, keepAlive, "http://sidecar/metrics")
	if want := fmt.Sprintf(`toolgate_sidecar_mcp_connections_open{listener="unix://%s"} %d`, p.sock, streams); !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %s", want)
	}
}

// TestMCPRequestsPastTheirBudgetAre503: at --max-mcp-connections, each
// with a stream held (POSTs the real MCP server answers as event streams
// and holds), one more MCP request is answered 503 with a reason and
// counted, and a decision on a new connection is answered as ever.
func TestMCPRequestsPastTheirBudgetAre503(t *testing.T) {
	up := startMCPServer(t)
	p := startSidecarProc(t, "--bundle-file="+writeBundleFile(t, mcptest.Bundle()), "--agent-id="+mcpAgent, "--decision-log=none",
		"--mcp-listen=127.0.0.1:0", "--mcp-upstream=pay="+up.endpoint("2025-11-25"), "--max-mcp-connections=2", "--max-connections=2")
	c := unixClient(p.sock)
	c.Timeout = 0
	url := "http://sidecar/mcp/pay"
	session, err := mcpSession(c, url)
	must(t, err)
	for i := range 2 {
		body, err := openPOSTStream(c, url, session, i+1)
		if err != nil {
			t.Fatalf("stream %d within the budget: %v", i+1, err)
		}
		t.Cleanup(func() { _ = body.Close() })
	}
	resp, err := c.Post(url, "application/json", strings.NewReader(`{"jsonrpc":"2.0","id":9,"method":"ping"}`))
	must(t, err)
	data, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(data), "--max-mcp-connections") {
		t.Fatalf("an MCP request past the budget: %s %s, want 503 naming --max-mcp-connections", resp.Status, data)
	}
	if d := p.decide(unixClient(p.sock), `{"tool_name":"pay","input":{"amount":5}}`); d.Decision != "allow" {
		t.Errorf("a decision with the MCP budget spent: %+v", d.Result)
	}
	_, metrics := getOver(t, unixClient(p.sock), "http://sidecar/metrics")
	if want := fmt.Sprintf(`toolgate_sidecar_mcp_connections_refused_total{listener="unix://%s"} 1`, p.sock); !strings.Contains(metrics, want) {
		t.Errorf("/metrics lacks %s", want)
	}
}
