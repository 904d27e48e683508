// Command loadgen drives a toolgate sidecar's POST /v1/evaluate over
// keep-alive connections and prints throughput and latency percentiles.
//
//	go run ./test/loadgen -self -c 8 -d 10s          # in-process sidecar, 1000-rule bundle
//	go run ./test/loadgen -url http://127.0.0.1:8181 -c 8 -d 10s -body req.json
//	go run ./test/loadgen -write-bundle /tmp/bundle.json   # for `toolgate sidecar --bundle-file`
//	go run ./test/loadgen -self -slow 1000          # the same run without, then with, 1000 slow connections
//	go run ./test/loadgen -self -via unix           # drive the in-process sidecar over its Unix socket
//	go run ./test/loadgen -null-server 127.0.0.1:9000  # serve a fixed answer: the machine's ceiling (null.go)
//	go run ./test/loadgen -url http://127.0.0.1:8181 -server-pid 1234  # also the server's CPU per request (cpu.go)
//
// Each worker is closed-loop (one request in flight per connection), so
// the concurrency is the number of connections.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/toolgate/toolgate/engine"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	os.Exit(run(ctx, os.Args[1:], os.Stdout, os.Stderr))
}

type config struct {
	url         string
	self        bool
	conc        int
	dur, warmup time.Duration
	bodyFile    string
	rules       int
	selfLog     string
	writeBundle string
	cpuProfile  string
	via         string
	slow        int
	slowEvery   time.Duration
	nullServer  string
	serverPID   int
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.url, "url", "", "sidecar to drive: http://host:port[/path][?explain=true], or unix:/path (unix:///path); default $TOOLGATE_URL unless -self")
	fs.BoolVar(&c.self, "self", false, "start an in-process sidecar with a generated bundle on a loopback port and drive it")
	fs.IntVar(&c.conc, "c", 8, "concurrency: keep-alive connections, one request in flight each")
	fs.DurationVar(&c.dur, "d", 10*time.Second, "measured duration")
	fs.DurationVar(&c.warmup, "warmup", time.Second, "unrecorded run before measuring")
	fs.StringVar(&c.bodyFile, "body", "", "file holding the request body (default: a built-in request that hits rule 500)")
	fs.IntVar(&c.rules, "rules", 1000, "rules in the generated bundle (-self, -write-bundle)")
	fs.StringVar(&c.selfLog, "self-log", "discard", "-self decision log: discard (formatted, then thrown away) or none")
	fs.StringVar(&c.writeBundle, "write-bundle", "", "write the generated bundle to this file and exit")
	fs.StringVar(&c.cpuProfile, "cpuprofile", "", "write a CPU profile of the measured run (with -self it includes the sidecar)")
	fs.StringVar(&c.via, "via", "tcp", "-self: drive the sidecar over tcp (its loopback port) or unix (its socket)")
	fs.IntVar(&c.slow, "slow", 0, "measure twice: as usual, then while this many connections trickle requests a byte at a time (or send nothing), as an attacker would; each is reopened when the sidecar cuts it")
	fs.DurationVar(&c.slowEvery, "slow-interval", 500*time.Millisecond, "-slow: a byte every this long, and a cut connection reopened after this long")
	fs.StringVar(&c.nullServer, "null-server", "", "serve a fixed answer to every request on this host:port until interrupted, reading requests by their framing only: the ceiling a server that does nothing reaches here")
	fs.IntVar(&c.serverPID, "server-pid", 0, "also report the CPU this local process (the server driven) spends per request over the measured run, from /proc/PID/stat")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if c.nullServer != "" {
		if c.url != "" || c.self || c.writeBundle != "" {
			return c, errors.New("-null-server serves; it takes none of -url, -self, -write-bundle")
		}
		if _, _, err := net.SplitHostPort(c.nullServer); err != nil {
			return c, fmt.Errorf("-null-server %q: want host:port: %v", c.nullServer, err)
		}
		return c, nil
	}
	if c.url == "" && !c.self && c.writeBundle == "" {
		c.url = os.Getenv("TOOLGATE_URL") // where an injected Pod's sidecar is
	}
	var errs []error
	if fs.NArg() > 0 {
		errs = append(errs, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	if c.writeBundle == "" && (c.url == "") == !c.self {
		errs = append(errs, errors.New("give exactly one of -url and -self"))
	}
	if c.url != "" {
		if _, err := parseTarget(c.url); err != nil {
			errs = append(errs, err)
		}
	}
	if c.conc < 1 || c.conc > 10000 {
		errs = append(errs, fmt.Errorf("-c %d: want 1 to 10000", c.conc))
	}
	if c.dur <= 0 {
		errs = append(errs, fmt.Errorf("-d %v: want a positive duration", c.dur))
	}
	if c.warmup < 0 {
		errs = append(errs, fmt.Errorf("-warmup %v: want zero or more", c.warmup))
	}
	if c.rules < 1 || c.rules > engine.MaxRulesPerPolicy {
		errs = append(errs, fmt.Errorf("-rules %d: want 1 to %d", c.rules, engine.MaxRulesPerPolicy))
	}
	if c.via != "tcp" && c.via != "unix" {
		errs = append(errs, fmt.Errorf("-via %q: want tcp or unix", c.via))
	}
	if c.via != "tcp" && !c.self {
		errs = append(errs, errors.New("-via is for -self; give -url unix:/path to drive a socket"))
	}
	if c.slow < 0 || c.slow > 100000 {
		errs = append(errs, fmt.Errorf("-slow %d: want 0 to 100000", c.slow))
	}
	if c.slowEvery <= 0 {
		errs = append(errs, fmt.Errorf("-slow-interval %v: want a positive duration", c.slowEvery))
	}
	if c.serverPID < 0 {
		errs = append(errs, fmt.Errorf("-server-pid %d: want a process id", c.serverPID))
	}
	if c.serverPID > 0 {
		if c.self {
			errs = append(errs, errors.New("-server-pid is for -url: with -self the sidecar is this process"))
		} else if _, err := processCPU(c.serverPID); err != nil {
			errs = append(errs, err)
		}
	}
	if c.selfLog != "discard" && c.selfLog != "none" {
		errs = append(errs, fmt.Errorf("-self-log %q: want discard or none", c.selfLog))
	}
	return c, errors.Join(errs...)
}

// readBody returns the request body, checked the way the sidecar checks it,
// so a typo in a body file is not measured as a run of 400s.
func readBody(file string) ([]byte, error) {
	body := []byte(sampleBody)
	if file != "" {
		var err error
		if body, err = os.ReadFile(file); err != nil {
			return nil, fmt.Errorf("-body: %v", err)
		}
	}
	// A body for OPA's Data API, {"input": REQUEST} (make
	// compare-opa-server), is checked by the request it wraps.
	checked := body
	var wrapped map[string]json.RawMessage
	if json.Unmarshal(body, &wrapped) == nil && len(wrapped) == 1 && wrapped["input"] != nil {
		checked = wrapped["input"]
	}
	if _, err := engine.DecodeRequest(checked); err != nil {
		return nil, fmt.Errorf("-body: %v", err)
	}
	return body, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	c, err := parseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return 2
	}
	if c.nullServer != "" {
		ln, err := net.Listen("tcp", c.nullServer)
		if err != nil {
			fmt.Fprintln(stderr, "loadgen:", err)
			return 1
		}
		fmt.Fprintf(stdout, "null server listening on %s\n", ln.Addr())
		if err := serveNull(ctx, ln); err != nil {
			fmt.Fprintln(stderr, "loadgen:", err)
			return 1
		}
		return 0
	}
	if c.writeBundle != "" {
		doc, err := generateBundle(c.rules)
		if err == nil {
			err = os.WriteFile(c.writeBundle, doc, 0o644)
		}
		if err != nil {
			fmt.Fprintln(stderr, "loadgen:", err)
			return 1
		}
		return 0
	}
	body, err := readBody(c.bodyFile)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return 2
	}
	url, what := c.url, c.url
	if c.self {
		base, stop, err := startSelf(ctx, c.rules, c.selfLog, c.via == "unix")
		if err != nil {
			fmt.Fprintln(stderr, "loadgen:", err)
			return 1
		}
		defer func() {
			if err := stop(); err != nil {
				fmt.Fprintln(stderr, "loadgen: stopping the sidecar:", err)
			}
		}()
		url = base
		what = fmt.Sprintf("%s (in-process sidecar, %d-rule bundle, decision log %s, default limits)", base, c.rules, c.selfLog)
	}
	t, err := parseTarget(url)
	if err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return 2
	}
	fmt.Fprintf(stdout, "target %s\nconcurrency %d, warm-up %v, duration %v, GOMAXPROCS %d\n",
		what, c.conc, c.warmup, c.dur, runtime.GOMAXPROCS(0))
	if c.cpuProfile != "" {
		stopProfile, err := startProfile(c.cpuProfile)
		if err != nil {
			fmt.Fprintln(stderr, "loadgen:", err)
			return 1
		}
		defer stopProfile()
	}
	r := drive(ctx, t, body, c.conc, c.warmup, c.dur, &cpuMeter{pid: c.serverPID, withSidecar: c.self})
	if c.slow == 0 {
		r.report(stdout)
		if r.errors > 0 || len(r.latencies) == 0 || r.cpu.err != nil {
			return 1
		}
		return 0
	}
	fmt.Fprintf(stdout, "--- without slow connections\n")
	r.report(stdout)
	slow, stopSlow := slowClients(ctx, t, c.slow, c.slowEvery)
	rs := drive(ctx, t, body, c.conc, max(c.warmup, c.slowEvery), c.dur, &cpuMeter{pid: c.serverPID, withSidecar: c.self})
	stopSlow()
	fmt.Fprintf(stdout, "--- with %d slow connections (a byte every %v; %d opened, %d cut by the sidecar, %d got a response, %d dials failed)\n",
		c.slow, c.slowEvery, slow.opened.Load(), slow.cut.Load(), slow.answered.Load(), slow.dialFailed.Load())
	rs.report(stdout)
	compare(stdout, r, rs)
	if r.errors > 0 || rs.errors > 0 || len(r.latencies) == 0 || len(rs.latencies) == 0 || r.cpu.err != nil || rs.cpu.err != nil {
		return 1
	}
	return 0
}

func startProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}
