// Command mcplatency measures what the sidecar's MCP proxy adds to a
// tools/call: real processes (the toolgate binary as sidecar, the test MCP
// server built with the official Go SDK), the official SDK client as the
// agent, calls with a 1 KiB argument alternating between a session straight
// to the server, one through the proxy, one through a bare
// httputil.ReverseProxy process (this binary with -bare-proxy): what an
// HTTP hop costs on this machine, and one through a TCP splice (-splice),
// which parses nothing: the least any process hop costs, so the proxy's
// own share can be told from both. A second sidecar serves the same
// bundle with -result-rules result rules added (issue 28), so what judging
// each result costs is printed beside the proxy without them (whose path
// holds and parses nothing). It also reports each process's CPU time per
// call, the steadier figure on a noisy machine.
//
//	go run ./test/mcplatency        (make measure-mcp)
//
// It exits non-zero when the added p50 or p99 is over its target.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/localcluster"
)

type config struct {
	calls, warmup, argBytes, rules int
	resultRules                    int
	pause                          time.Duration
	version, decisionLog           string
	targetP50, targetP99           time.Duration
	base                           string
}

func main() {
	if len(os.Args) == 4 && os.Args[1] == "-bare-proxy" {
		bareProxy(os.Args[2], os.Args[3])
		return
	}
	if len(os.Args) == 4 && os.Args[1] == "-splice" {
		splice(os.Args[2], os.Args[3])
		return
	}
	var c config
	flag.IntVar(&c.calls, "calls", 10000, "measured calls on each path")
	flag.IntVar(&c.warmup, "warmup", 500, "unmeasured calls on each path first")
	flag.IntVar(&c.argBytes, "arg-bytes", 1024, "size of the call's argument")
	flag.IntVar(&c.rules, "rules", 100, "rules in the bundle beside the pay cap")
	flag.IntVar(&c.resultRules, "result-rules", 10, "result rules the second sidecar's bundle adds (none match the read_file result)")
	flag.DurationVar(&c.pause, "pause", 0, "idle time before each call, as an agent's between its tool calls (0: none)")
	flag.StringVar(&c.decisionLog, "decision-log", "stdout", "the sidecar's --decision-log (stdout, as in production, or none)")
	flag.StringVar(&c.version, "version", "2025-11-25", "MCP protocol version (2025-11-25 or 2026-07-28)")
	flag.StringVar(&c.base, "base", "", "a git revision whose sidecar is measured beside this one on the same calls (the path without result rules before a change): empty for none")
	flag.DurationVar(&c.targetP50, "target-p50", 200*time.Microsecond, "fail when the added p50 is above this")
	flag.DurationVar(&c.targetP99, "target-p99", time.Millisecond, "fail when the added p99 is above this")
	flag.Parse()
	// Interrupted, it still stops its processes and removes its directory.
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "mcplatency:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) error {
	dir, err := os.MkdirTemp("", "toolgate-mcplatency")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	fmt.Println("building toolgate and test/mcpserver ...")
	for _, b := range [][2]string{{"toolgate", "./cmd/toolgate"}, {"mcpserver", "./test/mcpserver"}} {
		if _, err := localcluster.Build(dir, b[1], b[0]); err != nil {
			return err
		}
	}

	server := exec.Command(filepath.Join(dir, "mcpserver"), "-listen", "127.0.0.1:0")
	server.Stderr = os.Stderr
	server.SysProcAttr = orphanless()
	out, err := server.StdoutPipe()
	if err != nil {
		return err
	}
	if err := server.Start(); err != nil {
		return err
	}
	defer stop(server)
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return fmt.Errorf("mcpserver did not start: %v", err)
	}
	upstream := "http://" + strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
	endpoint := upstream + "/mcp"
	if c.version >= "2026-07-28" {
		endpoint = upstream + "/mcp-stateless"
	}

	sidecar, decisions, proxyAddr, err := startSidecar(dir, "toolgate", "bundle.json", bundleOf(c.rules), endpoint, c.decisionLog)
	if err != nil {
		return err
	}
	defer stop(sidecar)
	judging, _, judgingAddr, err := startSidecar(dir, "toolgate", "bundle-results.json", withResultRules(bundleOf(c.rules), c.resultRules), endpoint, c.decisionLog)
	if err != nil {
		return err
	}
	defer stop(judging)
	// The base revision's sidecar serves the same bundle as the first: the
	// path a change must leave as it was, measured on the same calls.
	var baseline *exec.Cmd
	var baselineAddr string
	if c.base != "" {
		fmt.Printf("building toolgate at %s ...\n", c.base)
		if err := localcluster.BuildAt(dir, c.base, "toolgate-base"); err != nil {
			return err
		}
		var cmd *exec.Cmd
		if cmd, _, baselineAddr, err = startSidecar(dir, "toolgate-base", "bundle-base.json", bundleOf(c.rules), endpoint, c.decisionLog); err != nil {
			return err
		}
		defer stop(cmd)
		baseline = cmd
	}

	bareAddr := freeAddr()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	bare := exec.Command(self, "-bare-proxy", bareAddr, endpoint)
	bare.Stderr = os.Stderr
	bare.SysProcAttr = orphanless()
	if err := bare.Start(); err != nil {
		return err
	}
	defer stop(bare)
	if err := waitListening(bareAddr); err != nil {
		return err
	}

	spliceAddr := freeAddr()
	spl := exec.Command(self, "-splice", spliceAddr, strings.TrimPrefix(upstream, "http://"))
	spl.Stderr = os.Stderr
	spl.SysProcAttr = orphanless()
	if err := spl.Start(); err != nil {
		return err
	}
	defer stop(spl)
	if err := waitListening(spliceAddr); err != nil {
		return err
	}

	direct, err := connect(ctx, endpoint, c.version)
	if err != nil {
		return fmt.Errorf("direct session: %w", err)
	}
	defer func() { _ = direct.Close() }()
	proxied, err := connect(ctx, "http://"+proxyAddr+"/mcp/files", c.version)
	if err != nil {
		return fmt.Errorf("proxied session: %w", err)
	}
	defer func() { _ = proxied.Close() }()
	hop, err := connect(ctx, "http://"+bareAddr+"/", c.version)
	if err != nil {
		return fmt.Errorf("bare proxy session: %w", err)
	}
	defer func() { _ = hop.Close() }()
	floor, err := connect(ctx, "http://"+spliceAddr+strings.TrimPrefix(endpoint, upstream), c.version)
	if err != nil {
		return fmt.Errorf("splice session: %w", err)
	}
	defer func() { _ = floor.Close() }()
	judged, err := connect(ctx, "http://"+judgingAddr+"/mcp/files", c.version)
	if err != nil {
		return fmt.Errorf("session through the sidecar with result rules: %w", err)
	}
	defer func() { _ = judged.Close() }()
	var based *mcp.ClientSession // nil without -base: that path is skipped
	if baseline != nil {
		if based, err = connect(ctx, "http://"+baselineAddr+"/mcp/files", c.version); err != nil {
			return fmt.Errorf("session through the base sidecar: %w", err)
		}
		defer func() { _ = based.Close() }()
	}

	args := map[string]any{"path": strings.Repeat("p", c.argBytes)}
	call := func(cs *mcp.ClientSession) (time.Duration, error) {
		start := time.Now()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "read_file", Arguments: args})
		took := time.Since(start)
		if err == nil && res.IsError {
			err = fmt.Errorf("the call was denied or failed: %s", resultText(res))
		}
		return took, err
	}
	var d, p, h, f, r, b []time.Duration
	var cpu0 [6]time.Duration
	cpuKnown := false
	metricsURL := "http://" + decisions + "/metrics"
	var held0 heldBuckets
	fmt.Printf("%d warm-up and %d measured tools/call (read_file, %d-byte argument, %s) each way, alternating ...\n",
		c.warmup, c.calls, c.argBytes, c.version)
	for i := range c.warmup + c.calls {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("interrupted after %d calls each way: %w", i, err)
		}
		var took [6]time.Duration
		for j, cs := range []*mcp.ClientSession{direct, proxied, hop, floor, judged, based} {
			if cs == nil {
				continue
			}
			if c.pause > 0 {
				time.Sleep(c.pause) // before each call, so no path finds the machine warmer
			}
			if took[j], err = call(cs); err != nil {
				return fmt.Errorf("call %d on path %d: %w", i, j, err)
			}
		}
		if i == c.warmup {
			cpu0, cpuKnown = cpuOf(server, sidecar, bare, spl, judging, baseline)
			if held0, err = heldOf(metricsURL); err != nil {
				return err
			}
		}
		if i >= c.warmup {
			d, p, h, f, r, b = append(d, took[0]), append(p, took[1]), append(h, took[2]), append(f, took[3]), append(r, took[4]), append(b, took[5])
		}
	}
	cpu1, ok := cpuOf(server, sidecar, bare, spl, judging, baseline)
	cpuKnown = cpuKnown && ok
	per := func(i int) time.Duration { return (cpu1[i] - cpu0[i]) / time.Duration(c.calls) }
	for _, s := range [][]time.Duration{d, p, h, f, r, b} {
		slices.Sort(s)
	}
	d50, d99, p50, p99, h50, h99 := pct(d, 50), pct(d, 99), pct(p, 50), pct(p, 99), pct(h, 50), pct(h, 99)
	fmt.Printf("direct:              p50 %v  p99 %v\n", d50, d99)
	f50, f99 := pct(f, 50), pct(f, 99)
	fmt.Printf("TCP splice:          p50 %v  p99 %v  (the floor of any process hop: +%v / +%v)\n", f50, f99, f50-d50, f99-d99)
	fmt.Printf("bare ReverseProxy:   p50 %v  p99 %v  (an HTTP hop: +%v / +%v)\n", h50, h99, h50-d50, h99-d99)
	fmt.Printf("toolgate MCP proxy:  p50 %v  p99 %v\n", p50, p99)
	fmt.Printf("added by toolgate:   p50 %v (target <= %v)  p99 %v (target <= %v)\n", p50-d50, c.targetP50, p99-d99, c.targetP99)
	r50, r99 := pct(r, 50), pct(r, 99)
	fmt.Printf("with %d result rules: p50 %v  p99 %v\n", c.resultRules, r50, r99)
	fmt.Printf("added, 1 KiB result:  no result rules p50 %v  p99 %v  |  %d result rules p50 %v  p99 %v\n",
		p50-d50, p99-d99, c.resultRules, r50-d50, r99-d99)
	if c.base != "" {
		b50, b99 := pct(b, 50), pct(b, 99)
		fmt.Printf("no result rules, before (%s) and now, same calls: added p50 %v -> %v  p99 %v -> %v\n", c.base, b50-d50, p50-d50, b99-d99, p99-d99)
	}
	fmt.Printf("beyond a bare hop:   p50 %v  p99 %v\n", p50-h50, p99-h99)
	fmt.Printf("beyond the floor:    p50 %v  p99 %v\n", p50-f50, p99-f99)
	held1, err := heldOf(metricsURL)
	if err != nil {
		return err
	}
	held := held1.minus(held0)
	fmt.Printf("held by toolgate:    p50 %v  p99 %v  (its mcp_held_seconds: a call's first byte read to its last written upstream)\n",
		held.quantile(0.5), held.quantile(0.99))
	if cpuKnown {
		// The server answers every path; the others, one each.
		paths := time.Duration(5)
		if c.base != "" {
			paths = 6
		}
		fmt.Printf("CPU per call:        toolgate %v  with result rules %v  bare ReverseProxy %v  TCP splice %v  (the server %v)\n", per(1), per(4), per(2), per(3), per(0)/paths)
		if c.base != "" {
			fmt.Printf("CPU per call, base:  toolgate at %s %v\n", c.base, per(5))
		}
	}
	if p50-d50 > c.targetP50 || p99-d99 > c.targetP99 {
		return errors.New("the proxy adds more than its target")
	}
	return nil
}

// bundleOf caps pay at 100 and adds rules for other tools, so the proxy
// evaluates a bundle of some size for each call.
func bundleOf(n int) engine.Bundle {
	raw := func(s string) []byte { return []byte(fmt.Sprintf("%q", s)) }
	rules := []engine.Rule{{ID: "pay-cap", Effect: "deny", Conditions: []engine.Condition{
		{Field: "tool_name", Operator: "eq", Value: raw("pay")},
		{Field: "input.amount", Operator: "gt", Value: []byte("100")}}}}
	for i := range n {
		rules = append(rules, engine.Rule{ID: fmt.Sprintf("r%d", i), Effect: "deny", Conditions: []engine.Condition{
			{Field: "tool_name", Operator: "eq", Value: raw(fmt.Sprintf("tool_%d", i))},
			{Field: "input.path", Operator: "contains", Value: raw(fmt.Sprintf("/secret_%d", i))}}})
	}
	return engine.Bundle{Policies: []engine.Policy{{ID: "bench", Version: 1, DefaultEffect: "allow", Rules: rules}}}
}

// startSidecar runs a sidecar serving b (written to dir/file) and
// proxying endpoint as upstream "files": its process, decision address and
// MCP proxy address.
func startSidecar(dir, bin, file string, b engine.Bundle, endpoint, decisionLog string) (*exec.Cmd, string, string, error) {
	bundleFile := filepath.Join(dir, file)
	doc, _, err := engine.Encode(b)
	if err != nil {
		return nil, "", "", err
	}
	if err := os.WriteFile(bundleFile, doc, 0o644); err != nil {
		return nil, "", "", err
	}
	decisions, proxyAddr := freeAddr(), freeAddr()
	sidecar := exec.Command(filepath.Join(dir, bin), "sidecar", "--bundle-file", bundleFile,
		"--agent-id", "bench-agent", "--decision-log", decisionLog, "--listen", decisions, "--mcp-listen", proxyAddr, "--mcp-upstream", "files="+endpoint)
	sidecar.Stdout = io.Discard // the decision log: written, as in production, then dropped
	sidecar.Stderr = os.Stderr
	sidecar.SysProcAttr = orphanless()
	if err := sidecar.Start(); err != nil {
		return nil, "", "", err
	}
	if err := waitReady("http://" + decisions + "/readyz"); err != nil {
		stop(sidecar)
		return nil, "", "", err
	}
	return sidecar, decisions, proxyAddr, nil
}

// withResultRules adds a policy of n result rules, of the kinds a
// deployment writes (secrets redacted, markers denied, sizes capped), none
// of which matches the read_file result measured: each result is held,
// parsed and judged, and goes on unchanged.
func withResultRules(b engine.Bundle, n int) engine.Bundle {
	raw := func(s string) []byte { return []byte(fmt.Sprintf("%q", s)) }
	kinds := []func(i int) engine.Rule{
		func(i int) engine.Rule {
			return engine.Rule{ID: fmt.Sprintf("redact-%d", i), Phase: engine.PhaseResult, Effect: string(engine.EffectRedact),
				Conditions: []engine.Condition{{Field: "output.text", Operator: "matches", Value: raw(fmt.Sprintf(`AKIA[0-9A-Z]{16}|secret_%d=[a-z0-9]{8}`, i))}}}
		},
		func(i int) engine.Rule {
			return engine.Rule{ID: fmt.Sprintf("marker-%d", i), Phase: engine.PhaseResult, Effect: "deny",
				Conditions: []engine.Condition{{Field: "output.text", Operator: "contains", Value: raw(fmt.Sprintf("INTERNAL-%d", i))}}}
		},
		func(i int) engine.Rule {
			return engine.Rule{ID: fmt.Sprintf("size-%d", i), Phase: engine.PhaseResult, Effect: "deny",
				Conditions: []engine.Condition{
					{Field: "tool_name", Operator: "eq", Value: raw("read_file")},
					{Field: "output.size", Operator: "gt", Value: []byte(fmt.Sprint(1_000_000 + i))}}}
		},
	}
	var rules []engine.Rule
	for i := range n {
		rules = append(rules, kinds[i%len(kinds)](i))
	}
	b.Policies = append(b.Policies, engine.Policy{ID: "results", Version: 1, DefaultEffect: "allow", Rules: rules})
	return b
}

func connect(ctx context.Context, endpoint, version string) (*mcp.ClientSession, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "mcplatency", Version: "1.0.0"}, nil)
	hc := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 16}}
	return client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true},
		&mcp.ClientSessionOptions{ProtocolVersion: version})
}

// cpuOf reads each process's CPU time so far (user and system, in
// clock ticks of 10 ms, Linux's USER_HZ) from /proc: what one call costs
// a process, measured over all of them. ok is false where /proc cannot
// tell.
func cpuOf(cmds ...*exec.Cmd) (t [6]time.Duration, ok bool) {
	for i, cmd := range cmds {
		if cmd == nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", cmd.Process.Pid))
		if err != nil {
			return t, false
		}
		// Fields after the command name, which may hold spaces: utime and
		// stime are the 12th and 13th.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 13 {
			return t, false
		}
		u, err1 := strconv.ParseInt(f[11], 10, 64)
		s, err2 := strconv.ParseInt(f[12], 10, 64)
		if err1 != nil || err2 != nil {
			return t, false
		}
		t[i] = time.Duration(u+s) * 10 * time.Millisecond
	}
	return t, true
}

// heldBuckets are the sidecar's toolgate_sidecar_mcp_held_seconds buckets
// for the measured upstream: cumulative counts by upper bound, ascending.
type heldBuckets struct {
	upper []float64
	count []uint64
}

func heldOf(metricsURL string) (heldBuckets, error) {
	var hb heldBuckets
	resp, err := http.Get(metricsURL)
	if err != nil {
		return hb, err
	}
	defer func() { _ = resp.Body.Close() }()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		return hb, fmt.Errorf("the sidecar's /metrics: %w", err)
	}
	if fam := families["toolgate_sidecar_mcp_held_seconds"]; fam != nil {
		for _, m := range fam.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "upstream" && l.GetValue() == "files" {
					for _, b := range m.GetHistogram().GetBucket() {
						hb.upper, hb.count = append(hb.upper, b.GetUpperBound()), append(hb.count, b.GetCumulativeCount())
					}
					return hb, nil
				}
			}
		}
	}
	return hb, errors.New("the sidecar's /metrics has no toolgate_sidecar_mcp_held_seconds for upstream files")
}

// minus is what was counted since before.
func (hb heldBuckets) minus(before heldBuckets) heldBuckets {
	out := heldBuckets{upper: hb.upper, count: slices.Clone(hb.count)}
	for i := range out.count {
		if i < len(before.count) {
			out.count[i] -= before.count[i]
		}
	}
	return out
}

// quantile interpolates within the bucket the q-th observation falls in,
// as PromQL's histogram_quantile does; past the last bound, that bound.
func (hb heldBuckets) quantile(q float64) time.Duration {
	if len(hb.count) == 0 {
		return 0
	}
	total := hb.count[len(hb.count)-1]
	rank := q * float64(total)
	lower, below := 0.0, uint64(0)
	for i, c := range hb.count {
		if math.IsInf(hb.upper[i], 1) {
			break
		}
		if float64(c) >= rank && c > below {
			s := lower + (hb.upper[i]-lower)*(rank-float64(below))/float64(c-below)
			return time.Duration(s * float64(time.Second)).Round(time.Microsecond)
		}
		lower, below = hb.upper[i], c
	}
	return time.Duration(lower * float64(time.Second))
}

func pct(sorted []time.Duration, p int) time.Duration {
	return sorted[(len(sorted)*p+99)/100-1]
}

func freeAddr() string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer func() { _ = ln.Close() }()
	return ln.Addr().String()
}

// bareProxy forwards everything to target, flushing streams: the hop
// without toolgate's work.
func bareProxy(addr, target string) {
	u, err := url.Parse(target)
	if err != nil {
		panic(err)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(pr *httputil.ProxyRequest) { pr.Out.URL = u; pr.Out.Host = "" },
		Transport: &http.Transport{MaxIdleConnsPerHost: 128},
		// A session's closing stream is no news here.
		ErrorLog: log.New(io.Discard, "", 0)}
	srv := &http.Server{Addr: addr, Handler: rp, ReadHeaderTimeout: 5 * time.Second}
	fmt.Fprintln(os.Stderr, srv.ListenAndServe())
}

// splice copies bytes both ways between each client and a connection of
// its own to target, parsing nothing: what a process hop costs at the
// least on this machine.
func splice(addr, target string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		panic(err)
	}
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return
		}
		go func() {
			defer func() { _ = c.Close() }()
			u, err := net.Dial("tcp", target)
			if err != nil {
				return
			}
			defer func() { _ = u.Close() }()
			go func() { _, _ = io.Copy(u, c); _ = u.(*net.TCPConn).CloseWrite() }()
			_, _ = io.Copy(c, u)
		}()
	}
}

func waitListening(addr string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if c, err := net.Dial("tcp", addr); err == nil {
			return c.Close()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("nothing listens on %s within 30s", addr)
}

func waitReady(url string) error {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("the sidecar was not ready at %s within 30s", url)
}

// orphanless has a child killed when this process dies, however it dies.
func orphanless() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }

func stop(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = cmd.Process.Kill()
		<-done
	}
}

// resultText is what a failed call's result says.
func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, t.Text)
		}
	}
	return strings.Join(parts, "\n")
}
