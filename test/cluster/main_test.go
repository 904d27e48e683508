//go:build cluster

// Package cluster runs the users' path on a real single-node cluster
// (internal/localcluster): helm install the chart with the locally built
// image, apply Policies, run annotated agents under a real kubelet, freeze
// them, lose the webhooks, upgrade and uninstall. It needs root and the
// binaries of hack/setup-cluster.sh; without them it fails, saying why.
package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/localcluster"
	"github.com/toolgate/toolgate/internal/ociimage"
	"github.com/toolgate/toolgate/internal/testenv"
)

// The images the suite imports into the node's containerd.
const (
	toolgateRepo = "toolgate.local/toolgate"
	toolgateTag  = "test"
	toolgateRef  = toolgateRepo + ":" + toolgateTag
	agentRef     = "toolgate.local/agent:test"
	agentBinary  = "/agentapp"
)

var imagesDir = filepath.Join(localcluster.StateDir, "images")

func archive(name string) string { return filepath.Join(imagesDir, name+".tar") }

var node *localcluster.Node

// helm runs the helm binary hack/install-helm.sh built against the node
// cluster.
var helm testenv.Helm

// chartVersion is the version the suite packages the chart as; the image
// it installs is set by installArgs.
const chartVersion = "0.0.0-test"

// chart is the packaged chart the suite installs and upgrades to: a .tgz
// made as `make release` makes it (testenv.Helm.Package), so what is
// tested is what a release ships, not the directory.
var chart string

func TestMain(m *testing.M) {
	if !localcluster.InNode() {
		// On the host: build the images (and helm) while the Go toolchain
		// can reach the module proxy, then run this binary again in the
		// node's network namespace, and tear down whatever happens there.
		os.Exit(localcluster.RunInNode(buildImages))
	}
	var err error
	if helm, err = testenv.InstallHelm(); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: %v\n", err)
		os.Exit(1)
	}
	if node, err = localcluster.StartNode([]string{archive("pause"), archive("toolgate"), archive("agent"), archive("redis")}); err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: starting the node cluster: %v\n", err)
		os.Exit(1)
	}
	helm.Env = nodeEnv()
	chartDir, err := os.MkdirTemp("", "toolgate-chart-")
	if err == nil {
		chart, err = helm.Package(testenv.ChartDir(), chartVersion, chartDir)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "FAIL: packaging the chart: %v\n", err)
		node.Stop()
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "localcluster: cluster up (control plane, containerd, images imported, kubelet, node Ready) in %v\n", node.Up.Round(time.Millisecond))
	code := m.Run()
	t := time.Now()
	node.Stop()
	os.RemoveAll(chartDir)
	fmt.Fprintf(os.Stderr, "localcluster: cluster stopped in %v\n", time.Since(t).Round(time.Millisecond))
	os.Exit(code)
}

// buildImages writes the four OCI archives: toolgate (the Dockerfile's
// final stage around the binary built as its build stage builds it), the
// test agent, the sandbox image and Redis (redisImage); and builds helm,
// if not yet in bin/.
func buildImages() error {
	if _, err := testenv.InstallHelm(); err != nil {
		return err
	}
	started := time.Now()
	if err := os.MkdirAll(imagesDir, 0o755); err != nil {
		return err
	}
	tg := filepath.Join(imagesDir, "toolgate")
	if err := ociimage.BuildToolgate(testenv.RepoRoot(), tg, "v0.0.0-cluster-test", "cluster"); err != nil {
		return err
	}
	agent := filepath.Join(imagesDir, "agentapp")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", agent, "./test/cluster/agentapp")
	cmd.Dir = testenv.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the test agent: %w\n%s", err, out)
	}
	redis, err := redisImage()
	if err != nil {
		return err
	}
	for _, img := range []struct {
		name string
		img  ociimage.Image
	}{
		{"toolgate", ociimage.Toolgate(toolgateRef, tg)},
		// The agent runs as a user of its own, not the sidecar's.
		{"agent", ociimage.Static(agentRef, agent, agentBinary, "1000:1000")},
		{"pause", ociimage.Static(localcluster.PauseImage, agent, "/pause", "65535:65535")},
		// This machine's redis-server, for the shared limits.
		{"redis", redis},
	} {
		if img.name == "pause" {
			img.img.Cmd = []string{"pause"}
		}
		if _, err := ociimage.Write(archive(img.name), img.img); err != nil {
			return err
		}
	}
	fmt.Fprintf(os.Stderr, "localcluster: images built in %v\n", time.Since(started).Round(time.Millisecond))
	return nil
}
