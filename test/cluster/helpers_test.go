//go:build cluster

package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/internal/testenv"
)

// nodeEnv points kubectl and helm at the node cluster, helm's own
// directories inside the node's.
func nodeEnv() []string {
	return []string{"KUBECONFIG=" + node.Kubeconfig, "HELM_CACHE_HOME=" + filepath.Join(node.Dir, "helm", "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(node.Dir, "helm", "config"), "HELM_DATA_HOME=" + filepath.Join(node.Dir, "helm", "data")}
}

// kubectl runs kubectl against the node cluster and returns its combined
// output.
func kubectl(args ...string) (string, error) {
	cmd := exec.Command(node.Bins.Kubectl, args...)
	cmd.Env = append(os.Environ(), nodeEnv()...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

func mustKubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := kubectl(args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// kubectlStdin runs kubectl with stdin.
func kubectlStdin(stdin string, args ...string) (string, error) {
	cmd := exec.Command(node.Bins.Kubectl, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+node.Kubeconfig)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// poll is how often the suite looks again: each look is a kubectl
// process or a round trip to the node's API server.
const poll = 200 * time.Millisecond

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	return c
}

// request reads a sample request from config/samples/requests.
func request(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", "requests", name))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// answer is what the tests read from the sidecar.
type answer struct {
	Decision      string `json:"decision"`
	Code          string `json:"code"`
	MatchedRuleID string `json:"matchedRuleId"`
	Reason        string `json:"reason"`
}

func (a answer) String() string {
	return fmt.Sprintf("%s code=%q rule=%q reason=%q", a.Decision, a.Code, a.MatchedRuleID, a.Reason)
}

// evaluateIn asks the sidecar from inside container c of pod, through
// url ("env": $TOOLGATE_URL as the injector set it).
func evaluateIn(ns, pod, c, url, req string) (answer, string, error) {
	cmd := exec.Command(node.Bins.Kubectl, "exec", "-n", ns, pod, "-c", c, "--", agentBinary, "evaluate", url, req)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+node.Kubeconfig)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	out := string(b)
	if err != nil {
		return answer{}, out + stderr.String(), err
	}
	var a answer
	if err := json.Unmarshal([]byte(out), &a); err != nil {
		return answer{}, out, fmt.Errorf("decoding %q: %w", out, err)
	}
	return a, out, nil
}

// logDuration reports a measured duration in the test log and on stderr
// (docs/performance.md's real-node figures come from here).
func logDuration(t *testing.T, what string, d time.Duration) {
	t.Helper()
	t.Logf("MEASURED %s: %v", what, d.Round(time.Millisecond))
	fmt.Fprintf(os.Stderr, "MEASURED %s: %v\n", what, d.Round(time.Millisecond))
}
