package localcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/internal/testenv"
)

// Versions of the node cluster's components (hack/setup-cluster.sh).
const (
	KubernetesVersion = "1.37.2"
	ContainerdVersion = "2.4.2"
	// PauseImage is the sandbox image: built here, imported, and pinned in
	// containerd's configuration so nothing ever pulls it.
	PauseImage = "toolgate.local/pause:test"
)

// Bins are the paths of the node cluster's binaries.
type Bins struct {
	Etcd, APIServer, ControllerManager, Scheduler, Kubelet, Proxy string
	// Kubectl is kubectl of the cluster's version, for the tests.
	Kubectl               string
	Containerd, Shim, Ctr string
}

func (b Bins) all() []string {
	return []string{b.Etcd, b.APIServer, b.ControllerManager, b.Scheduler, b.Kubelet, b.Proxy, b.Kubectl, b.Containerd, b.Shim, b.Ctr}
}

// Binaries returns where hack/setup-cluster.sh puts the binaries (under
// bin/ of the repository, or $TOOLGATE_CLUSTER_BIN/{k8s,containerd}).
func Binaries() (Bins, error) {
	bin := os.Getenv("TOOLGATE_CLUSTER_BIN")
	if bin == "" {
		bin = filepath.Join(testenv.RepoRoot(), "bin")
	}
	bin, err := filepath.Abs(bin)
	if err != nil {
		return Bins{}, err
	}
	if r, err := filepath.EvalSymlinks(bin); err == nil {
		bin = r
	}
	k := filepath.Join(bin, "k8s", KubernetesVersion)
	c := filepath.Join(bin, "containerd", ContainerdVersion)
	return Bins{
		Etcd: filepath.Join(k, "etcd"), APIServer: filepath.Join(k, "kube-apiserver"),
		ControllerManager: filepath.Join(k, "kube-controller-manager"), Scheduler: filepath.Join(k, "kube-scheduler"),
		Kubelet: filepath.Join(k, "kubelet"), Proxy: filepath.Join(k, "kube-proxy"), Kubectl: filepath.Join(k, "kubectl"),
		Containerd: filepath.Join(c, "containerd"), Shim: filepath.Join(c, "containerd-shim-runc-v2"), Ctr: filepath.Join(c, "ctr"),
	}, nil
}

// Node is a running single-node cluster: control plane, containerd,
// kubelet, kube-proxy and a bridge CNI, all in NodeNetns. Start it from the
// process RunInNode re-executed (InNode), which lives in that namespace.
type Node struct {
	// Kubeconfig is an admin (system:masters) kubeconfig for kubectl and
	// helm; Config and Client use it (Client knows toolgate's kinds).
	Kubeconfig string
	Config     *rest.Config
	Client     client.Client
	Clientset  *kubernetes.Clientset
	Dir        string
	Bins       Bins
	// Up is how long Start took, Ready when the node was Ready.
	Up time.Duration

	procs []*Process
}

// StartNode starts the cluster and imports the OCI archives in images
// (besides the pause image, which must be among them) into containerd.
func StartNode(images []string) (*Node, error) {
	if !InNode() {
		return nil, errors.New("StartNode runs in the process RunInNode started in the node's network namespace")
	}
	bins, err := Binaries()
	if err != nil {
		return nil, err
	}
	started := time.Now()
	n := &Node{Dir: StateDir, Bins: bins}
	if err := n.start(images); err != nil {
		n.Stop()
		return nil, err
	}
	n.Up = time.Since(started)
	return n, nil
}

func (n *Node) path(p ...string) string { return filepath.Join(append([]string{n.Dir}, p...)...) }

func (n *Node) start(images []string) error {
	for _, d := range []string{"run", "logs", "etcd", "containerd/root", "containerd/state", "kubelet", "pod-logs", "manifests", "cni/net.d", "cni/ipam", "etc"} {
		if err := os.MkdirAll(n.path(d), 0o755); err != nil {
			return err
		}
	}
	p, err := newPKI(n.path("pki"))
	if err != nil {
		return err
	}
	server := "https://" + NodeIP + ":6443"
	if err := p.issue("apiserver", "kube-apiserver", nil, []string{NodeIP, APIServiceIP, "127.0.0.1", "localhost",
		"kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}); err != nil {
		return err
	}
	if err := p.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client", []string{"system:masters"}, nil); err != nil {
		return err
	}
	kc := map[string]string{}
	for _, u := range []struct{ name, cn, org string }{
		{"admin", "toolgate-test-admin", "system:masters"},
		{"controller-manager", "system:kube-controller-manager", ""},
		{"scheduler", "system:kube-scheduler", ""},
		{"kubelet", "system:node:" + NodeName, "system:nodes"},
		{"proxy", "system:kube-proxy", ""},
	} {
		var orgs []string
		if u.org != "" {
			orgs = []string{u.org}
		}
		if kc[u.name], err = p.kubeconfig(u.name, u.cn, orgs, server); err != nil {
			return err
		}
	}
	n.Kubeconfig = kc["admin"]

	if err := n.run("etcd", nil, n.Bins.Etcd, "--data-dir="+n.path("etcd"), "--name=default",
		"--listen-client-urls=http://127.0.0.1:12379", "--advertise-client-urls=http://127.0.0.1:12379",
		"--listen-peer-urls=http://127.0.0.1:12380", "--initial-advertise-peer-urls=http://127.0.0.1:12380",
		"--initial-cluster=default=http://127.0.0.1:12380", "--unsafe-no-fsync", "--log-level=warn"); err != nil {
		return err
	}
	if err := n.run("kube-apiserver", nil, n.Bins.APIServer,
		"--etcd-servers=http://127.0.0.1:12379", "--bind-address=0.0.0.0", "--secure-port=6443", "--advertise-address="+NodeIP,
		"--service-cluster-ip-range="+ServiceCIDR, "--allow-privileged=true", "--authorization-mode=Node,RBAC",
		"--client-ca-file="+p.path("ca.crt"), "--tls-cert-file="+p.path("apiserver.crt"), "--tls-private-key-file="+p.path("apiserver.key"),
		"--kubelet-client-certificate="+p.path("apiserver-kubelet-client.crt"), "--kubelet-client-key="+p.path("apiserver-kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local", "--service-account-key-file="+p.path("sa.pub"),
		"--service-account-signing-key-file="+p.path("sa.key"), "--cert-dir="+n.path("pki", "apiserver-certs"),
		"--endpoint-reconciler-type=lease", "--profiling=false"); err != nil {
		return err
	}
	if n.Config, err = clientcmd.BuildConfigFromFlags("", n.Kubeconfig); err != nil {
		return err
	}
	if n.Clientset, err = kubernetes.NewForConfig(n.Config); err != nil {
		return err
	}
	if err := n.waitFor("the API server to be ready", 60*time.Second, "kube-apiserver", func(ctx context.Context) (bool, error) {
		b, err := n.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(b) == "ok", nil
	}); err != nil {
		return err
	}
	if n.Client, err = client.New(n.Config, client.Options{Scheme: testenv.Scheme()}); err != nil {
		return err
	}
	if err := n.run("kube-controller-manager", nil, n.Bins.ControllerManager, "--kubeconfig="+kc["controller-manager"],
		"--authentication-kubeconfig="+kc["controller-manager"], "--authorization-kubeconfig="+kc["controller-manager"],
		"--bind-address=127.0.0.1", "--secure-port=10257", "--leader-elect=false", "--use-service-account-credentials=true",
		"--service-account-private-key-file="+p.path("sa.key"), "--root-ca-file="+p.path("ca.crt"),
		"--service-cluster-ip-range="+ServiceCIDR, "--controllers=*,-node-ipam-controller",
		"--cert-dir="+n.path("pki", "kcm-certs")); err != nil {
		return err
	}
	if err := n.run("kube-scheduler", nil, n.Bins.Scheduler, "--kubeconfig="+kc["scheduler"],
		"--authentication-kubeconfig="+kc["scheduler"], "--authorization-kubeconfig="+kc["scheduler"],
		"--bind-address=127.0.0.1", "--secure-port=10259", "--leader-elect=false", "--cert-dir="+n.path("pki", "scheduler-certs")); err != nil {
		return err
	}

	if err := n.startContainerd(images); err != nil {
		return err
	}
	if err := n.startKubelet(kc["kubelet"]); err != nil {
		return err
	}
	if err := n.startProxy(kc["proxy"]); err != nil {
		return err
	}
	if err := n.waitFor("node "+NodeName+" to be Ready", 120*time.Second, "kubelet", func(ctx context.Context) (bool, error) {
		node, err := n.Clientset.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	}); err != nil {
		return err
	}
	return n.waitFor("the default ServiceAccount and kube-root-ca.crt", 60*time.Second, "kube-controller-manager", func(ctx context.Context) (bool, error) {
		_, err1 := n.Clientset.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		_, err2 := n.Clientset.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		if apierrors.IsNotFound(err1) || apierrors.IsNotFound(err2) {
			return false, nil
		}
		return err1 == nil && err2 == nil, nil
	})
}

func (n *Node) startContainerd(images []string) error {
	cni := fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "toolgate-localcluster", "plugins": [
  {"type": "bridge", "bridge": %q, "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "dataDir": %q, "ranges": [[{"subnet": %q}]],
            "routes": [{"dst": "%s/32"}, {"dst": %q}]}}]}
`, bridgeName, n.path("cni", "ipam"), PodCIDR, NodeIP, ServiceCIDR)
	if err := os.WriteFile(n.path("cni", "net.d", "10-toolgate.conflist"), []byte(cni), 0o644); err != nil {
		return err
	}
	sock := n.path("run", "containerd.sock")
	cfg := fmt.Sprintf(`version = 3
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.nri.v1.nri", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]
[grpc]
  address = %[3]q
[ttrpc]
  address = "%[3]s.ttrpc"
[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[4]q
[plugins.'io.containerd.cri.v1.runtime']
  # Root here may lack CAP_SYS_RESOURCE: runc could not lower oom_score_adj
  # and every sandbox would fail ("can't get final child's PID from pipe").
  restrict_oom_score_adj = %[8]t
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%[5]q]
    conf_dir = %[6]q
[plugins.'io.containerd.internal.v1.opt']
  path = %[7]q
`, n.path("containerd", "root"), n.path("containerd", "state"), sock, PauseImage, cniDir, n.path("cni", "net.d"), n.path("containerd", "opt"), !hasCapSysResource())
	conf := n.path("etc", "containerd.toml")
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		return err
	}
	env := []string{"PATH=" + filepath.Dir(n.Bins.Shim) + ":" + os.Getenv("PATH")}
	if err := n.run("containerd", env, n.Bins.Containerd, "--config", conf); err != nil {
		return err
	}
	if err := n.waitFor("containerd's socket", 30*time.Second, "containerd", func(context.Context) (bool, error) {
		return exec.Command(n.Bins.Ctr, "--address", sock, "version").Run() == nil, nil
	}); err != nil {
		return err
	}
	for _, img := range images {
		if out, err := n.Ctr("images", "import", img); err != nil {
			return fmt.Errorf("importing %s: %w\n%s", img, err, out)
		}
	}
	return nil
}

// hasCapSysResource tells whether this process may lower oom_score_adj.
func hasCapSysResource() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			var caps uint64
			_, _ = fmt.Sscanf(strings.TrimSpace(v), "%x", &caps)
			const capSysResource = 24
			return caps&(1<<capSysResource) != 0
		}
	}
	return false
}

// Ctr runs ctr against the node's containerd, in the k8s.io namespace,
// and returns its standard output (its standard error is in the error).
func (n *Node) Ctr(args ...string) ([]byte, error) {
	cmd := exec.Command(n.Bins.Ctr, append([]string{"--address", n.path("run", "containerd.sock"), "-n", "k8s.io"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		err = fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, stderr.Bytes())
	}
	return out, err
}

func (n *Node) startKubelet(kubeconfig string) error {
	cfg := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: 10250
healthzBindAddress: 127.0.0.1
healthzPort: 10248
readOnlyPort: 0
cgroupDriver: cgroupfs
# cgroup v1 (these machines have a v1 hybrid hierarchy) is deprecated; allow it.
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://%s
podLogsDir: %s
staticPodPath: %s
# The API server holds no CA for the kubelet's self-signed serving
# certificate and calls it (logs, exec) with a system:masters client
# certificate; the kubelet lets anyone in, on the node's namespace only.
authentication: {anonymous: {enabled: true}, webhook: {enabled: false}, x509: {clientCAFile: %q}}
authorization: {mode: AlwaysAllow}
evictionHard: {"memory.available": "100Mi", "nodefs.available": "1%%", "imagefs.available": "1%%", "nodefs.inodesFree": "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# else the kubelet adds its own iptables chains
makeIPTablesUtilChains: false
# else Pods get the host's nameserver
resolvConf: ""
clusterDomain: cluster.local
serializeImagePulls: false
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
`, NodeIP, n.path("run", "containerd.sock"), n.path("pod-logs"), n.path("manifests"), n.path("pki", "ca.crt"))
	conf := n.path("etc", "kubelet.yaml")
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		return err
	}
	return n.run("kubelet", nil, n.Bins.Kubelet, "--config="+conf, "--kubeconfig="+kubeconfig, "--root-dir="+n.path("kubelet"),
		"--cert-dir="+n.path("kubelet", "pki"), "--hostname-override="+NodeName, "--node-ip="+NodeIP)
}

func (n *Node) startProxy(kubeconfig string) error {
	cfg := fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: %q}
hostnameOverride: %s
bindAddress: %s
clusterCIDR: %s
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
# nf_conntrack_max is host-wide: leave it alone
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false}
`, kubeconfig, NodeName, NodeIP, PodCIDR)
	conf := n.path("etc", "kube-proxy.yaml")
	if err := os.WriteFile(conf, []byte(cfg), 0o644); err != nil {
		return err
	}
	return n.run("kube-proxy", nil, n.Bins.Proxy, "--config="+conf)
}

// run starts a daemon logging to logs/<name>.log, with its pid file.
func (n *Node) run(name string, env []string, bin string, args ...string) error {
	d, err := startLogged(name, n.path("logs", name+".log"), env, bin, args...)
	if err != nil {
		return err
	}
	n.procs = append(n.procs, d)
	return os.WriteFile(n.path("run", name+".pid"), fmt.Appendf(nil, "%d %s", d.Cmd.Process.Pid, bin), 0o644)
}

// waitFor polls cond until it holds, failing early when the daemon it
// depends on exits, with the end of its log.
func (n *Node) waitFor(what string, timeout time.Duration, daemonName string, cond func(context.Context) (bool, error)) error {
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ok, err := cond(ctx)
		cancel()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		for _, d := range n.procs {
			select {
			case <-d.done:
				return fmt.Errorf("%s exited while waiting for %s; end of %s:\n%s", d.Name, what, d.Log, tail(d.Log, 3000))
			default:
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v waiting for %s; end of logs/%s.log:\n%s", timeout, what, daemonName, tail(n.path("logs", daemonName+".log"), 3000))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// LogTail returns the end of a daemon's log, for failure messages.
func (n *Node) LogTail(name string, size int) string { return tail(n.path("logs", name+".log"), size) }

func tail(path string, size int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > size {
		b = b[len(b)-size:]
	}
	return string(b)
}

// Stop stops the kubelet, the containers, then every daemon, newest first.
// RunInNode's Teardown (on the host) removes whatever is left.
func (n *Node) Stop() {
	stopped := false
	for i := len(n.procs) - 1; i >= 0; i-- {
		d := n.procs[i]
		if d.Name == "containerd" && !stopped {
			n.killContainers()
			stopped = true
		}
		d.stopWithin(5 * time.Second)
		_ = os.Remove(n.path("run", d.Name+".pid"))
	}
}

func (n *Node) killContainers() {
	out, err := n.Ctr("tasks", "ls", "-q")
	if err != nil {
		return
	}
	ids := strings.Fields(string(out))
	for _, id := range ids {
		_, _ = n.Ctr("tasks", "kill", "-s", "SIGKILL", id)
	}
	for _, id := range ids {
		for range 20 {
			if _, err := n.Ctr("tasks", "delete", "-f", id); err == nil || strings.Contains(err.Error(), "not found") {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
