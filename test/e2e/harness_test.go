package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/internal/localcluster"
	"github.com/toolgate/toolgate/internal/testenv"
)

// decision is what the tests read from a sidecar's answer.
type decision struct {
	Decision       string `json:"decision"`
	Code           string `json:"code"`
	MatchedRuleID  string `json:"matchedRuleId"`
	Reason         string `json:"reason"`
	BundleRevision string `json:"bundleRevision"`
	// Effect and Warnings: issue 9's gateway model.
	Effect          string   `json:"effect"`
	Warnings        []string `json:"warnings"`
	MatchedResource *struct {
		Type string `json:"type"`
		Name string `json:"name"`
	} `json:"matchedResource"`
}

func (d decision) String() string {
	return fmt.Sprintf("%s code=%q rule=%q rev=%.19s", d.Decision, d.Code, d.MatchedRuleID, d.BundleRevision)
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

func evaluate(addr string, req map[string]any) (decision, error) {
	body, _ := json.Marshal(req)
	resp, err := httpClient.Post("http://"+addr+"/v1/evaluate", "application/json", bytes.NewReader(body))
	if err != nil {
		return decision{}, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return decision{}, fmt.Errorf("HTTP %d: %s", resp.StatusCode, b)
	}
	var d decision
	return d, json.Unmarshal(b, &d)
}

// answersEventually polls until the sidecar at addr answers req as want
// says, and returns that answer.
func answersEventually(t *testing.T, addr string, req map[string]any, what string, want func(decision) bool) decision {
	t.Helper()
	var last decision
	testenv.EventuallyWithin(t, 30*time.Second, 50*time.Millisecond, fmt.Sprintf("sidecar %s answering %v with %s", addr, req, what), func() (bool, string) {
		var err error
		last, err = evaluate(addr, req)
		return err == nil && want(last), fmt.Sprintf("last: %v, err %v", last, err)
	})
	return last
}

func is(dec, code, rule string) func(decision) bool {
	// A rule's deny is coded by the rule's id: code "" names none of the
	// sidecar's own codes.
	if code == "" && dec == "deny" && rule != "" {
		code = rule
	}
	return func(d decision) bool { return d.Decision == dec && d.Code == code && d.MatchedRuleID == rule }
}

// kubelet plays the kubelet for a ConfigMap volume: it projects the bundle
// ConfigMap into dir with the atomic ..data symlink swap kubelet uses, and an
// empty projection when the ConfigMap is gone (optional volume).
type kubelet struct {
	c        client.Client
	key      client.ObjectKey
	dir      string
	n        int
	lastSeen string
}

func (k *kubelet) run(ctx context.Context) {
	for ctx.Err() == nil {
		var cm corev1.ConfigMap
		err := k.c.Get(ctx, k.key, &cm)
		files := map[string][]byte{}
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			time.Sleep(200 * time.Millisecond)
			continue
		default:
			for name, data := range cm.Data {
				files[name] = []byte(data)
			}
			for name, data := range cm.BinaryData {
				files[name] = data
			}
		}
		if sig := signature(files); sig != k.lastSeen {
			if err := k.project(files); err == nil {
				k.lastSeen = sig
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func signature(files map[string][]byte) string {
	var b strings.Builder
	for _, name := range []string{"bundle.json", "bundle.json.gz"} {
		fmt.Fprintf(&b, "%s=%x;", name, files[name])
	}
	return b.String()
}

func (k *kubelet) project(files map[string][]byte) error {
	k.n++
	ts := filepath.Join(k.dir, fmt.Sprintf("..2026_11_30_%06d", k.n))
	if err := os.Mkdir(ts, 0o755); err != nil {
		return err
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(ts, name), data, 0o644); err != nil {
			return err
		}
	}
	tmp := filepath.Join(k.dir, "..data_tmp")
	_ = os.Remove(tmp)
	if err := os.Symlink(filepath.Base(ts), tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(k.dir, "..data")); err != nil {
		return err
	}
	for _, name := range []string{"bundle.json", "bundle.json.gz"} {
		link := filepath.Join(k.dir, name)
		if _, ok := files[name]; ok {
			_ = os.Symlink(filepath.Join("..data", name), link)
		} else {
			_ = os.Remove(link)
		}
	}
	return nil
}

// startCluster builds toolgate and starts a local control plane in dir,
// stopped when the test ends.
func startCluster(t *testing.T, dir string) (bin string, cluster *localcluster.Cluster) {
	t.Helper()
	bin, err := localcluster.BuildToolgate(dir)
	if err != nil {
		t.Fatal(err)
	}
	cluster, err = localcluster.Start(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cluster.Stop)
	return bin, cluster
}
