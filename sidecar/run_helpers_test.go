package sidecar

import (
	"bufio"
	"context"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// startRun runs the whole sidecar (Run) on a loopback port and returns its
// base URL. Cleanup stops it and fails the test if Run did not return
// cleanly.
func startRun(t *testing.T, o Options) string {
	t.Helper()
	if slices.Equal(o.Listen, DefaultOptions().Listen) {
		o.Listen = []string{"127.0.0.1:0"}
	}
	ctx, cancel := context.WithCancel(context.Background())
	addrs := make(chan net.Addr, len(o.Listen))
	done := make(chan error, 1)
	go func() { done <- Run(ctx, o, func(a net.Addr) { addrs <- a }) }()
	var addr net.Addr
	select {
	case addr = <-addrs:
	case err := <-done:
		cancel()
		t.Fatalf("Run ended before listening: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("Run did not start listening")
	}
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run returned %v after a clean stop", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("Run did not stop")
		}
	})
	return "http://" + addr.String()
}

// metricValue reads one unlabelled series, or the sum of a labelled one's
// series, from /metrics.
func metricValue(t *testing.T, base, name string) float64 {
	t.Helper()
	_, body := get(t, base+"/metrics")
	total, found := 0.0, false
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name+" ") && !strings.HasPrefix(line, name+"{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		total, found = total+v, true
	}
	if !found {
		return 0
	}
	return total
}

func readyRevision(t *testing.T, base string) string {
	t.Helper()
	status, body := get(t, base+"/readyz")
	if status != 200 {
		return ""
	}
	i := strings.Index(body, `"bundleRevision":"`)
	if i < 0 {
		t.Fatalf("readyz body without a revision: %s", body)
	}
	rest := body[i+len(`"bundleRevision":"`):]
	return rest[:strings.IndexByte(rest, '"')]
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
