// Command scale measures the operator at many namespaces, black-box: on a
// real kube-apiserver and etcd (envtest) it creates N namespaces of
// -objects-per-namespace objects each, then starts the real manager (the
// toolgate binary, a separate process) and times, through watches, every
// bundle ConfigMap published and every object's status Ready for its
// generation; then it changes one Policy at a time and times each change
// to the bundle carrying it, and counts the manager's API writes per change
// in the API server's audit log. The manager's peak RSS is read from
// /proc. With -base REV the manager built at that revision is measured the
// same way in the same run, before this one (after it with -base-last).
// With -floor, a tight loop first makes the same writes without a manager,
// on a control plane of its own: the fastest any manager could go here.
//
//	make measure-scale
//	KUBEBUILDER_ASSETS=$(hack/setup-envtest.sh | tail -n 1) go run ./test/scale -namespaces 1000 -base 3a10af4
//
// It exits non-zero when the current build misses a target.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/internal/localcluster"
)

// The targets (issue 29).
const (
	targetPublish1000 = 5 * time.Second
	targetReady1000   = 10 * time.Second
	targetRSS10000    = 1536 << 20 // 1.5 GiB
	targetUpdateP99   = time.Second
	targetWrites      = 3.0
)

type config struct {
	sizes        []int
	perNamespace int
	updates      int
	base         string
	baseBin      string
	workers      int
	timeout      time.Duration
	// variants are this build's manager flags, one measured run each:
	// -manager-args split at ";" (one empty variant without it).
	variants []string
	baseLast bool
	floor    []int
	keep     bool
}

func main() {
	var c config
	var sizes, extra, floor string
	flag.StringVar(&sizes, "namespaces", "1000,10000", "comma-separated namespace counts, one run (and table row) each")
	flag.IntVar(&c.perNamespace, "objects-per-namespace", 6, "objects per namespace: Policies, a FrozenAgent, an Agent and a PolicyException (at least 4)")
	flag.IntVar(&c.updates, "updates", 100, "single-Policy changes to time after the cold start, one by one, in as many namespaces")
	flag.StringVar(&c.base, "base", "", "a git revision whose manager is measured the same way in the same run, before this one: empty for none")
	flag.StringVar(&c.baseBin, "base-bin", "", "with -base: a toolgate binary already built at that revision (as -keep leaves it), used instead of building it again")
	flag.IntVar(&c.workers, "workers", 32, "requests in flight while creating the objects")
	flag.DurationVar(&c.timeout, "timeout", 20*time.Minute, "give up on a cold start after this long")
	flag.StringVar(&extra, "manager-args", "", "extra flags for this build's manager only, space-separated (such as --pprof-bind-address=127.0.0.1:6060); "+
		`several sets separated by ";" are measured one after the other, each on its own control plane ("--max-concurrent-reconciles=4;--max-concurrent-reconciles=16")`)
	flag.BoolVar(&c.baseLast, "base-last", false, "with -base: measure the base after this build, not before (to see whether run order matters)")
	flag.StringVar(&floor, "floor", "", "comma-separated request concurrencies: before the managers, measure on a control plane of its own how fast a tight loop "+
		"creates one ConfigMap per namespace and patches every object's status at each (the fastest any manager could publish here); empty: not measured")
	flag.BoolVar(&c.keep, "keep", false, "keep the working directory (logs, audit log) and print its path")
	flag.Parse()
	var err error
	if c.sizes, err = parseCounts("-namespaces", sizes); err == nil && floor != "" {
		c.floor, err = parseCounts("-floor", floor)
	}
	if err == nil {
		c.variants = strings.Split(extra, ";")
		err = c.validate()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(2)
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "scale:", err)
		os.Exit(1)
	}
}

// parseCounts reads a flag of positive integers separated by commas
// (-namespaces, -floor).
func parseCounts(name, s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%s %q: %q is not a positive number", name, s, f)
		}
		out = append(out, n)
	}
	return out, nil
}

func (c config) validate() error {
	switch {
	case c.perNamespace < 4:
		return fmt.Errorf("-objects-per-namespace %d: at least 4 (a Policy, a FrozenAgent, an Agent, a PolicyException)", c.perNamespace)
	case c.updates < 1:
		return fmt.Errorf("-updates %d: at least 1", c.updates)
	case c.workers < 1:
		return fmt.Errorf("-workers %d: at least 1", c.workers)
	}
	if c.baseBin != "" && c.base == "" {
		return fmt.Errorf("-base-bin %s: also say which revision it was built at with -base", c.baseBin)
	}
	if c.baseLast && c.base == "" {
		return errors.New("-base-last: there is no base to measure last without -base")
	}
	for i, v := range c.variants {
		if len(c.variants) > 1 && strings.TrimSpace(v) == "" {
			return fmt.Errorf("-manager-args: set %d of %d is empty (a stray %q?)", i+1, len(c.variants), ";")
		}
	}
	for _, n := range c.sizes {
		if c.updates > n {
			return fmt.Errorf("-updates %d is more than the %d namespaces: each change goes to its own namespace", c.updates, n)
		}
	}
	return nil
}

// result is one manager measured at one size.
type result struct {
	build           string
	current         bool   // this checkout's build
	load            string // the load average when the run ended
	namespaces      int
	objects         int
	populate        time.Duration
	publish, ready  time.Duration
	rss             int64 // peak, bytes
	p50, p99        time.Duration
	writesPerChange float64
	writeKinds      map[string]int
	coldWritesPerNS float64
	coldWriteKinds  map[string]int
	managerLog      string
	updateReadyP99  time.Duration
	updates         int
}

func run(c config) error {
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	dir, err := os.MkdirTemp("", "toolgate-scale")
	if err != nil {
		return err
	}
	if c.keep {
		fmt.Println("working directory:", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	type build struct {
		name, bin string
		args      []string
		current   bool // this checkout, whose targets decide the exit status
	}
	var builds []build
	switch {
	case c.base != "" && c.baseBin != "":
		builds = append(builds, build{name: "base " + c.base, bin: c.baseBin})
	case c.base != "":
		logf("building toolgate at %s", c.base)
		if err := localcluster.BuildAt(dir, c.base, "toolgate-base"); err != nil {
			return err
		}
		builds = append(builds, build{name: "base " + c.base, bin: filepath.Join(dir, "toolgate-base")})
	}
	logf("building toolgate from this checkout")
	bin, err := localcluster.BuildToolgate(dir)
	if err != nil {
		return err
	}
	for _, v := range c.variants {
		name := "this checkout"
		if len(c.variants) > 1 {
			name = strings.TrimSpace(v)
		}
		builds = append(builds, build{name: name, bin: bin, args: strings.Fields(v), current: true})
	}
	if c.baseLast {
		builds = append(builds[1:], builds[0])
	}

	var floors []floorResult
	var results []result
	for _, n := range c.sizes {
		if len(c.floor) > 0 {
			f, err := measureFloor(c, floorDir(dir, n), n)
			if err != nil {
				return fmt.Errorf("floor at %d namespaces: %w", n, err)
			}
			floors = append(floors, f...)
			printFloor(floors)
		}
		for i, b := range builds {
			r, err := measure(c, filepath.Join(dir, fmt.Sprintf("run-%d-%d", n, i)), n, b.bin, b.args)
			if err != nil {
				return fmt.Errorf("%s at %d namespaces: %w", b.name, n, err)
			}
			r.build, r.current, r.load = b.name, b.current, loadAverage()
			results = append(results, r)
			printFloor(floors)
			printTable(results)
		}
	}
	var missed []string
	for _, r := range results {
		if r.current {
			missed = append(missed, r.missed()...)
		}
	}
	if len(missed) > 0 {
		return errors.New("targets missed: " + strings.Join(missed, "; "))
	}
	fmt.Println("every target met")
	return nil
}

// measure runs one cold start and its updates on a fresh control plane.
func measure(c config, dir string, n int, bin string, extraArgs []string) (result, error) {
	r := result{namespaces: n, objects: n * c.perNamespace, updates: c.updates}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return r, err
	}
	cp, err := startControlPlane(dir)
	if err != nil {
		return r, err
	}
	defer cp.stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	logf("%d namespaces: creating %d objects", n, r.objects)
	start := time.Now()
	if _, err := populate(ctx, cp.admin, n, c.perNamespace, c.workers); err != nil {
		return r, err
	}
	r.populate = time.Since(start)
	tr, err := startTracker(ctx, cp.adminCfg, max(1, c.perNamespace-3), r.objects)
	if err != nil {
		return r, err
	}
	audit, err := newAuditCounter(cp.auditLog)
	if err != nil {
		return r, err
	}

	logf("%d namespaces: created in %s; starting the manager", n, r.populate.Round(time.Second))
	r.managerLog = filepath.Join(dir, "manager.log")
	mgr, err := startManager(bin, r.managerLog, append([]string{"manager", "--kubeconfig", cp.kubeconfig,
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--enable-webhooks=false",
		"--signing-namespace", "default"}, extraArgs...))
	if err != nil {
		return r, err
	}
	defer mgr.stop()
	t0 := mgr.started

	deadline := time.Now().Add(c.timeout)
	nextLog := time.Now().Add(10 * time.Second)
	for {
		published, ready, lastPublished, lastReady := tr.progress()
		if published == n && ready == r.objects {
			r.publish, r.ready = lastPublished.Sub(t0), lastReady.Sub(t0)
			break
		}
		if mgr.exited() {
			return r, fmt.Errorf("the manager exited (log: %s)", r.managerLog)
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("after %s: %d/%d bundles published, %d/%d objects Ready (RSS %s)",
				c.timeout, published, n, ready, r.objects, mib(mgr.peakRSS()))
		}
		if time.Now().After(nextLog) {
			logf("  %s: %d/%d bundles, %d/%d Ready, RSS %s", time.Since(t0).Round(time.Second), published, n, ready, r.objects, mib(mgr.rss()))
			nextLog = time.Now().Add(10 * time.Second)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, with the deadline above
	}
	logf("%d namespaces: published in %s, Ready in %s", n, r.publish.Round(time.Millisecond), r.ready.Round(time.Millisecond))
	if err := audit.catchUp(); err != nil {
		return r, err
	}
	cold, coldKinds := audit.snapshot(func(ns string) bool { return strings.HasPrefix(ns, "scale-") })
	r.coldWritesPerNS, r.coldWriteKinds = float64(cold)/float64(n), coldKinds

	// Each change goes to its own namespace, spread over all of them.
	changed := map[string]bool{}
	for i := range c.updates {
		changed[namespaceName(i*n/c.updates)] = true
	}
	inChanged := func(ns string) bool { return changed[ns] }
	before, beforeKinds := audit.snapshot(inChanged)
	var lat, readyLat []time.Duration
	for i := range c.updates {
		ns := namespaceName(i * n / c.updates)
		d, dr, err := update(ctx, cp.admin, tr, ns, fmt.Sprintf("marker-%d", i))
		if err != nil {
			return r, fmt.Errorf("update %d in %s: %w", i, ns, err)
		}
		lat, readyLat = append(lat, d), append(readyLat, dr)
	}
	r.p50, r.p99 = quantile(lat, 0.50), quantile(lat, 0.99)
	r.updateReadyP99 = quantile(readyLat, 0.99)

	// The manager's writes into the changed namespaces during the changes.
	// Each change was waited for until its bundle and its status were
	// seen, so only writes after those (events) can still be coming: the
	// count is taken once a second passed without one.
	after, afterKinds := -1, map[string]int(nil)
	for settle := time.Now().Add(30 * time.Second); ; {
		if err := audit.catchUp(); err != nil {
			return r, err
		}
		now, kinds := audit.snapshot(inChanged)
		if now == after || time.Now().After(settle) {
			break
		}
		after, afterKinds = now, kinds
		time.Sleep(time.Second) // a quiet second ends the count, within the deadline above
	}
	r.writesPerChange = float64(after-before) / float64(c.updates)
	r.writeKinds = map[string]int{}
	for k, v := range afterKinds {
		if d := v - beforeKinds[k]; d > 0 {
			r.writeKinds[k] = d
		}
	}
	r.rss = mgr.peakRSS()
	return r, nil
}

// update changes rule 0 of ns's Policy p0 to marker and returns how long
// after the write the bundle carrying it and the Policy's Ready status for
// the new generation were seen.
func update(ctx context.Context, c client.Client, tr *tracker, ns, marker string) (toBundle, toReady time.Duration, err error) {
	p := &v1alpha1.Policy{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "p0"}, p); err != nil {
		return 0, 0, err
	}
	patch := client.MergeFrom(p.DeepCopy())
	p.Spec.Rules[0].Conditions[0].Value = jsonString(marker)
	bundled := tr.expectMarker(ns, marker)
	ready := tr.expectReady(p, p.Generation+1)
	start := time.Now()
	if err := c.Patch(ctx, p, patch); err != nil {
		return 0, 0, err
	}
	timeout := time.After(30 * time.Second)
	for bundled != nil || ready != nil {
		select {
		case at := <-bundled:
			toBundle, bundled = at.Sub(start), nil
		case at := <-ready:
			toReady, ready = at.Sub(start), nil
		case <-timeout:
			return 0, 0, fmt.Errorf("after 30s: bundle seen %v, status Ready seen %v", bundled == nil, ready == nil)
		}
	}
	return toBundle, toReady, nil
}

// managerProcess is the running manager.
type managerProcess struct {
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{}
}

func startManager(bin, logPath string, args []string) (*managerProcess, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	m := &managerProcess{cmd: cmd, done: make(chan struct{})}
	m.started = time.Now()
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, err
	}
	go func() {
		_ = cmd.Wait()
		_ = logFile.Close()
		close(m.done)
	}()
	return m, nil
}

func (m *managerProcess) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

func (m *managerProcess) stop() {
	if m.exited() {
		return
	}
	_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-m.cmd.Process.Pid, syscall.SIGKILL)
		<-m.done
	}
}

// peakRSS and rss read the manager's VmHWM (the peak resident set since
// it started) and VmRSS from /proc; 0 when unreadable.
func (m *managerProcess) peakRSS() int64 { return procStatus(m.cmd.Process.Pid, "VmHWM:") }
func (m *managerProcess) rss() int64     { return procStatus(m.cmd.Process.Pid, "VmRSS:") }

func procStatus(pid int, field string) int64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}

func quantile(d []time.Duration, q float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[max(0, int(math.Ceil(q*float64(len(s))))-1)]
}

// missed names the targets r does not meet; those of a size apply only
// to runs at that size or more.
func (r result) missed() []string {
	var out []string
	if r.namespaces <= 1000 && r.publish > targetPublish1000 {
		out = append(out, fmt.Sprintf("publish at %d namespaces %s > %s", r.namespaces, r.publish.Round(time.Millisecond), targetPublish1000))
	}
	if r.namespaces <= 1000 && r.ready > targetReady1000 {
		out = append(out, fmt.Sprintf("Ready at %d namespaces %s > %s", r.namespaces, r.ready.Round(time.Millisecond), targetReady1000))
	}
	if r.namespaces <= 10000 && r.rss > targetRSS10000 {
		out = append(out, fmt.Sprintf("RSS at %d namespaces %s > %s", r.namespaces, mib(r.rss), mib(targetRSS10000)))
	}
	if r.p99 > targetUpdateP99 {
		out = append(out, fmt.Sprintf("update p99 at %d namespaces %s > %s", r.namespaces, r.p99.Round(time.Millisecond), targetUpdateP99))
	}
	if r.writesPerChange > targetWrites {
		out = append(out, fmt.Sprintf("writes per change at %d namespaces %.2f > %.0f", r.namespaces, r.writesPerChange, targetWrites))
	}
	return out
}

// printTable prints every result so far, one row per size and build,
// with the targets in the header.
func printTable(results []result) {
	fmt.Println()
	fmt.Printf("%-8s %-8s %-32s %-10s %-10s %-10s %-9s %-9s %-9s %-10s %-12s %-15s %s\n",
		"ns", "objects", "manager", "create", "published", "Ready", "RSS peak", "upd p50", "upd p99", "upd Ready", "writes/chg", "cold writes/ns", "load at end")
	fmt.Printf("%-8s %-8s %-32s %-10s %-10s %-10s %-9s %-9s %-9s %-10s %-12s %-15s %s\n",
		"target", "", "", "", "<=5s@1k", "<=10s@1k", "<=1.5GiB", "", "<=1s", "p99", "<=3", "", "")
	for _, r := range results {
		fmt.Printf("%-8d %-8d %-32s %-10s %-10s %-10s %-9s %-9s %-9s %-10s %-12s %-15.2f %s\n",
			r.namespaces, r.objects, r.build, r.populate.Round(100*time.Millisecond), r.publish.Round(10*time.Millisecond),
			r.ready.Round(10*time.Millisecond), mib(r.rss), r.p50.Round(time.Millisecond), r.p99.Round(time.Millisecond),
			r.updateReadyP99.Round(time.Millisecond), fmt.Sprintf("%.2f", r.writesPerChange), r.coldWritesPerNS, r.load)
	}
	for _, r := range results {
		fmt.Printf("  %s at %d namespaces: manager writes per change %s; per namespace at cold start %s\n", r.build, r.namespaces,
			perResource(r.writeKinds, r.updates), perResource(r.coldWriteKinds, r.namespaces))
	}
}

// perResource is kinds divided by n, largest first.
func perResource(kinds map[string]int, n int) string {
	names := make([]string, 0, len(kinds))
	for k := range kinds {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return kinds[names[i]] > kinds[names[j]] })
	parts := make([]string, 0, len(names))
	for _, k := range names {
		parts = append(parts, fmt.Sprintf("%s %.2f", k, float64(kinds[k])/float64(n)))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// loadAverage is the machine's 1, 5 and 15 minute load averages, as
// uptime prints them; "?" when unreadable.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(raw)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "?"
}

func mib(b int64) string { return fmt.Sprintf("%dMiB", b>>20) }

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05")}, args...)...)
}
