package localcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// The node cluster's fixed names and addresses. Every address other than
// 127.0.0.0/8 lives in the network namespace NodeNetns (and the Pods' own
// namespaces below it): the host's interfaces and routes are never touched.
const (
	NodeName    = "toolgate-node"
	NodeNetns   = "toolgate-node"
	peerNetns   = "toolgate-peer"
	nodeLink    = "tg-node0" // in NodeNetns, carries NodeIP
	peerLink    = "tg-peer0" // its veth peer in peerNetns, no address
	bridgeName  = "tg-cni0"  // the bridge CNI's bridge, in NodeNetns
	NodeIP      = "10.254.254.1"
	PodCIDR     = "10.254.1.0/24"
	ServiceCIDR = "10.254.200.0/24"
	// APIServiceIP is the "kubernetes" Service's ClusterIP.
	APIServiceIP = "10.254.200.1"
	// StateDir holds everything the node cluster writes: its data, logs,
	// sockets, pid files and what teardown must restore. It is fixed, so
	// a run finds and removes what a killed run left behind.
	StateDir = "/var/lib/toolgate-localcluster"
	lockPath = "/run/toolgate-localcluster.lock"
	// innerEnv marks the process re-executed inside NodeNetns.
	innerEnv = "TOOLGATE_LOCALCLUSTER_NODE"
)

// Host-global sysctls the kubelet (protectKernelDefaults false) or the
// bridge plugin may change; teardown puts back what they were.
var hostSysctls = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/ip_forward",
	"net/netfilter/nf_conntrack_max", "net/bridge/bridge-nf-call-iptables", "net/bridge/bridge-nf-call-ip6tables",
}

// Host paths the kubelet and containerd create outside their root
// directories; teardown removes those that did not exist before.
var hostPaths = []string{"/run/netns", "/var/lib/kubelet", "/run/containerd", "/var/run/netns", "/var/log/pods", "/var/log/containers", "/etc/kubernetes", "/var/lib/cni", "/opt/cni"}

// hostState is written to StateDir/host.json before anything changes.
type hostState struct {
	Sysctls map[string]string `json:"sysctls"`
	// Existed: hostPaths that were there before.
	Existed map[string]bool `json:"existed"`
	// Cgroups: the kubepods cgroups that were there before (none, normally).
	Cgroups map[string]bool `json:"cgroups"`
	// CNINetns: the cni-* network namespaces under /run/netns that were
	// there before (another runtime's), which teardown leaves alone.
	CNINetns map[string]bool `json:"cniNetns"`
}

// InNode tells whether this process is the one RunInNode re-executed
// inside the node's network namespace.
func InNode() bool { return os.Getenv(innerEnv) == "1" }

// RunInNode is the host side of a test binary's TestMain: it checks that
// this machine can run a kubelet (an error says why not: the suite must
// fail, not skip), takes the one-cluster-per-machine lock, removes what a
// killed earlier run left, records the host state, creates the node's
// network namespace, runs this same binary again inside it (where InNode is
// true and TestMain starts the cluster), then tears everything down,
// whatever the run's outcome, and returns its exit code. prepare runs
// before the re-execution, on the host, where the Go toolchain can reach
// the network (building images).
func RunInNode(prepare func() error) (code int) {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "FAIL: localcluster: "+format+"\n", args...)
		return 1
	}
	if err := Preflight(); err != nil {
		if errors.Is(err, errNotBuilt) && os.Getenv("TOOLGATE_CLUSTER_BIN") == "" {
			// As the envtest suites build their control plane on first use.
			fmt.Fprintln(os.Stderr, "localcluster: building the node with hack/setup-cluster.sh (cold: ~20 minutes on 2 busy cores)")
			cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "hack", "setup-cluster.sh"))
			cmd.Stdout, cmd.Stderr = io.Discard, os.Stderr
			if err := cmd.Run(); err != nil {
				return fail("hack/setup-cluster.sh: %v", err)
			}
			err = Preflight()
		}
		if err != nil {
			return fail("this machine cannot run the test cluster: %v", err)
		}
	}
	unlock, err := lock()
	if err != nil {
		return fail("%v", err)
	}
	defer unlock()
	started := time.Now()
	if err := Teardown(); err != nil {
		return fail("removing a previous run's cluster: %v", err)
	}
	if d := time.Since(started); d > time.Second {
		fmt.Fprintf(os.Stderr, "localcluster: removed a previous run's leftovers in %v\n", d.Round(time.Millisecond))
	}
	if c := kubepodsCgroups(); len(c) > 0 {
		return fail("this machine cannot run the test cluster: another kubelet's cgroups are here (%s)", strings.Join(c, ", "))
	}
	// The host's own interfaces, addresses, routes and forwarding must not
	// change, while the cluster runs or after: a change fails the run.
	guard, err := guardHostNet(250 * time.Millisecond)
	if err != nil {
		return fail("reading the host's network: %v", err)
	}
	defer func() {
		t := time.Now()
		if err := Teardown(); err != nil {
			fmt.Fprintf(os.Stderr, "localcluster: teardown: %v\n", err)
		}
		fmt.Fprintf(os.Stderr, "localcluster: teardown took %v\n", time.Since(t).Round(time.Millisecond))
		if changed := guard.finish(); changed != "" {
			fmt.Fprintf(os.Stderr, "FAIL: localcluster changed the host's own network (only namespaces it creates may hold its addresses): %s\n", changed)
			code = 1
		}
	}()
	if err := setupHost(); err != nil {
		return fail("setting up the node's network namespace: %v", err)
	}
	if prepare != nil {
		if err := prepare(); err != nil {
			return fail("%v", err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		return fail("%v", err)
	}
	// nsenter --net, not `ip netns exec`: that one remounts /sys, hiding the
	// cgroup hierarchy from the kubelet.
	cmd := exec.Command("nsenter", append([]string{"--net=/run/netns/" + NodeNetns, "--", self}, os.Args[1:]...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), innerEnv+"=1")
	if err := cmd.Start(); err != nil {
		return fail("starting the test binary in %s: %v", NodeNetns, err)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	signal.Stop(sigs)
	if err != nil {
		keepLogs()
		var exit *exec.ExitError
		if errors.As(err, &exit) && exit.ExitCode() > 0 {
			return exit.ExitCode()
		}
		return fail("the test binary in %s: %v", NodeNetns, err)
	}
	return 0
}

// keepLogs copies the daemons' logs out of StateDir, which teardown
// removes, and says where.
func keepLogs() {
	dir, err := os.MkdirTemp("", "toolgate-localcluster-logs-")
	if err != nil {
		return
	}
	if out, err := exec.Command("cp", "-r", filepath.Join(StateDir, "logs"), filepath.Join(StateDir, "pod-logs"), dir).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "localcluster: keeping the logs: %v: %s\n", err, out)
	}
	fmt.Fprintf(os.Stderr, "localcluster: the run failed; the daemons' and Pods' logs are in %s\n", dir)
}

// Preflight checks what a kubelet needs here: root, a cgroup hierarchy,
// network namespaces, the binaries from hack/setup-cluster.sh and Debian's.
func Preflight() error {
	if os.Geteuid() != 0 {
		return errors.New("not root (a kubelet, containerd and network namespaces need root)")
	}
	if _, err := os.Stat("/sys/fs/cgroup/cpu"); err != nil {
		if _, err2 := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err2 != nil {
			return errors.New("no cgroup hierarchy under /sys/fs/cgroup")
		}
	}
	if _, err := os.Stat("/proc/self/ns/net"); err != nil {
		return errors.New("no network namespaces")
	}
	for _, tool := range []string{"nsenter", "ip", "runc", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%w: %s not found (hack/setup-cluster.sh installs Debian's runc, iptables, iproute2)", errNotBuilt, tool)
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniDir, p)); err != nil {
			return fmt.Errorf("%w: CNI plugin %s not in %s (hack/setup-cluster.sh installs containernetworking-plugins)", errNotBuilt, p, cniDir)
		}
	}
	bins, err := Binaries()
	if err != nil {
		return err
	}
	for _, p := range bins.all() {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%w: %s missing: run hack/setup-cluster.sh (make setup-cluster)", errNotBuilt, p)
		}
	}
	return nil
}

const cniDir = "/usr/lib/cni"

// errNotBuilt: what hack/setup-cluster.sh provides is missing.
var errNotBuilt = errors.New("not set up")

// lock takes the machine-wide lock (one node cluster at a time), waiting
// for another run to finish.
func lock() (func(), error) {
	for {
		f, err := os.OpenFile(lockPath, os.O_CREATE|os.O_RDWR, 0o600)
		if err != nil {
			return nil, err
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			fmt.Fprintf(os.Stderr, "localcluster: waiting for another run's cluster (%s)\n", lockPath)
			if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
				_ = f.Close()
				return nil, err
			}
		}
		// The holder before us may have removed the file: lock the one
		// that is at the path.
		var a, b syscall.Stat_t
		if syscall.Fstat(int(f.Fd()), &a) == nil && syscall.Stat(lockPath, &b) == nil && a.Ino == b.Ino {
			return func() { _ = os.Remove(lockPath); _ = f.Close() }, nil
		}
		_ = f.Close()
	}
}

func sysctlPath(name string) string { return filepath.Join("/proc/sys", name) }

func setupHost() error {
	st := hostState{Sysctls: map[string]string{}, Existed: map[string]bool{}, Cgroups: map[string]bool{}, CNINetns: map[string]bool{}}
	for _, f := range cniNetns() {
		st.CNINetns[f] = true
	}
	for _, s := range hostSysctls {
		if b, err := os.ReadFile(sysctlPath(s)); err == nil {
			st.Sysctls[s] = strings.TrimSpace(string(b))
		}
	}
	for _, p := range hostPaths {
		_, err := os.Lstat(p)
		st.Existed[p] = err == nil
	}
	for _, c := range kubepodsCgroups() {
		st.Cgroups[c] = true
	}
	if err := os.MkdirAll(StateDir, 0o700); err != nil {
		return err
	}
	b, _ := json.Marshal(st)
	if err := os.WriteFile(filepath.Join(StateDir, "host.json"), b, 0o600); err != nil {
		return err
	}
	// The node's IP sits on one end of a veth pair created inside its
	// namespace; the peer lives in a second namespace, without address or
	// route: nothing reaches off the machine.
	for _, args := range [][]string{
		{"netns", "add", NodeNetns},
		{"netns", "add", peerNetns},
		{"-n", NodeNetns, "link", "add", nodeLink, "type", "veth", "peer", "name", peerLink, "netns", peerNetns},
		{"-n", NodeNetns, "link", "set", "lo", "up"},
		{"-n", peerNetns, "link", "set", "lo", "up"},
		{"-n", peerNetns, "link", "set", peerLink, "up"},
		{"-n", NodeNetns, "addr", "add", NodeIP + "/32", "dev", nodeLink},
		{"-n", NodeNetns, "link", "set", nodeLink, "up"},
		// ClusterIPs must route somewhere for kube-proxy's DNAT to see the
		// node's own connections (the API server calling the webhooks).
		{"-n", NodeNetns, "route", "add", ServiceCIDR, "dev", nodeLink},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// kubepodsCgroups lists the kubelet's top cgroups in every hierarchy.
func kubepodsCgroups() []string {
	var out []string
	for _, pattern := range []string{"/sys/fs/cgroup/*/kubepods", "/sys/fs/cgroup/kubepods", "/sys/fs/cgroup/*/kubepods.slice", "/sys/fs/cgroup/kubepods.slice"} {
		m, _ := filepath.Glob(pattern)
		out = append(out, m...)
	}
	return out
}

// Teardown stops whatever a node cluster left running and undoes its host
// changes: the processes (the daemons by their pid files, every container
// by its cgroup, anything left in the node's namespace), mounts under
// StateDir and /run/netns, the kubepods cgroups, the namespaces, the
// recorded sysctls and host paths, then StateDir itself. It is safe to
// call when nothing is there.
func Teardown() error {
	b, err := os.ReadFile(filepath.Join(StateDir, "host.json"))
	if errors.Is(err, os.ErrNotExist) {
		if _, err := os.Stat(StateDir); errors.Is(err, os.ErrNotExist) && !netnsExists(NodeNetns) && !netnsExists(peerNetns) {
			return nil
		}
	}
	var st hostState
	if err == nil {
		_ = json.Unmarshal(b, &st)
	}
	var errs []error
	killPidFiles()
	killCgroupProcs(st.Cgroups)
	killNetnsProcs(NodeNetns)
	unmountUnder(StateDir)
	unmountCNINetns(st.CNINetns)
	for _, c := range kubepodsCgroups() {
		if !st.Cgroups[c] {
			if err := removeCgroupTree(c); err != nil {
				errs = append(errs, err)
			}
		}
	}
	for _, ns := range []string{NodeNetns, peerNetns} {
		if netnsExists(ns) {
			if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
				errs = append(errs, fmt.Errorf("ip netns del %s: %v: %s", ns, err, out))
			}
		}
	}
	for name, v := range st.Sysctls {
		if cur, err := os.ReadFile(sysctlPath(name)); err == nil && strings.TrimSpace(string(cur)) != v {
			if err := os.WriteFile(sysctlPath(name), []byte(v), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("restoring %s=%s: %w", name, v, err))
			}
		}
	}
	if st.Existed != nil {
		for _, p := range hostPaths {
			if st.Existed[p] {
				continue
			}
			if p == "/run/netns" || p == "/var/run/netns" {
				// `ip netns add` made it a bind mount of itself.
				if entries, _ := os.ReadDir(p); len(entries) == 0 {
					_ = syscall.Unmount(p, syscall.MNT_DETACH)
					_ = os.Remove(p)
				}
				continue
			}
			if err := os.RemoveAll(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := os.RemoveAll(StateDir); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func netnsExists(name string) bool {
	_, err := os.Stat(filepath.Join("/run/netns", name))
	return err == nil
}

// killPidFiles ends the daemons recorded in StateDir/run/*.pid, when the
// process is still the binary that was started.
func killPidFiles() {
	files, _ := filepath.Glob(filepath.Join(StateDir, "run", "*.pid"))
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		fields := strings.SplitN(strings.TrimSpace(string(b)), " ", 2)
		pid, err := strconv.Atoi(fields[0])
		if err != nil || len(fields) < 2 {
			continue
		}
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && strings.TrimSuffix(exe, " (deleted)") == fields[1] {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			pids = append(pids, pid)
		}
	}
	waitGone(pids)
}

// killCgroupProcs kills every process in the kubepods cgroups (the
// containers) and containerd's shims, leaving alone the cgroups that were
// there before (another kubelet's).
func killCgroupProcs(before map[string]bool) {
	for range 20 {
		var pids []int
		for _, top := range kubepodsCgroups() {
			if before[top] {
				continue
			}
			_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					pids = append(pids, readPids(filepath.Join(p, "cgroup.procs"))...)
				}
				return nil
			})
		}
		pids = append(pids, shimPids()...)
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		waitGone(pids)
	}
}

// shimPids finds containerd-shim-runc-v2 processes run from bin/.
func shimPids() []int {
	bins, err := Binaries()
	if err != nil {
		return nil
	}
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid)); err == nil && strings.TrimSuffix(exe, " (deleted)") == bins.Shim {
			out = append(out, pid)
		}
	}
	return out
}

// killNetnsProcs kills every process still in netns name (never this one,
// which runs in the host's).
func killNetnsProcs(name string) {
	if !netnsExists(name) {
		return
	}
	for range 10 {
		out, _ := exec.Command("ip", "netns", "pids", name).Output()
		var pids []int
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
				pids = append(pids, pid)
			}
		}
		if len(pids) == 0 {
			return
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		waitGone(pids)
	}
}

func readPids(file string) []int {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil {
			out = append(out, pid)
		}
	}
	return out
}

func waitGone(pids []int) {
	deadline := time.Now().Add(5 * time.Second)
	for _, pid := range pids {
		for time.Now().Before(deadline) {
			if syscall.Kill(pid, 0) != nil {
				break
			}
			// A zombie child of ours: reap it.
			var ws syscall.WaitStatus
			_, _ = syscall.Wait4(pid, &ws, syscall.WNOHANG, nil)
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// mounts lists the mount points of this mount namespace, deepest first.
func mounts() []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 {
			out = append(out, unescapeMount(f[4]))
		}
	}
	// Reverse mount order unmounts children before their parents.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

func unmountUnder(dir string) {
	for range 3 {
		n := 0
		for _, m := range mounts() {
			if m == dir || strings.HasPrefix(m, dir+"/") {
				_ = syscall.Unmount(m, syscall.MNT_DETACH)
				n++
			}
		}
		if n == 0 {
			return
		}
	}
}

func cniNetns() []string {
	files, _ := filepath.Glob("/run/netns/cni-*")
	return files
}

// unmountCNINetns removes the Pods' network namespaces containerd pinned
// under /run/netns (cni-<uuid>), except those that were there before.
func unmountCNINetns(before map[string]bool) {
	for _, f := range cniNetns() {
		if before[f] {
			continue
		}
		_ = syscall.Unmount(f, syscall.MNT_DETACH)
		_ = os.Remove(f)
	}
}

func removeCgroupTree(top string) error {
	var dirs []string
	_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	var last error
	for i := len(dirs) - 1; i >= 0; i-- {
		for try := 0; ; try++ {
			err := os.Remove(dirs[i])
			if err == nil || errors.Is(err, os.ErrNotExist) {
				break
			}
			if try == 50 {
				last = fmt.Errorf("removing cgroup %s: %w", dirs[i], err)
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	return last
}
