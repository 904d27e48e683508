package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"
)

// target is where requests go: TCP host:port or a Unix socket.
type target struct {
	network, addr string
	host, path    string // for the request line and Host header
}

func parseTarget(raw string) (target, error) {
	if path, ok := strings.CutPrefix(raw, "unix:"); ok {
		if after, isURL := strings.CutPrefix(path, "//"); isURL { // unix:///path, as TOOLGATE_URL says it
			if !strings.HasPrefix(after, "/") {
				return target{}, fmt.Errorf("-url %q names a host; a socket URL is unix:///absolute/path", raw)
			}
			path = after
		}
		if path == "" {
			return target{}, errors.New("-url unix: needs a socket path")
		}
		return target{network: "unix", addr: path, host: "sidecar", path: "/v1/evaluate"}, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return target{}, fmt.Errorf("-url: %v", err)
	}
	if u.Scheme != "http" {
		return target{}, fmt.Errorf("-url %q: only http:// (or unix:/path) is supported", raw)
	}
	if u.Host == "" {
		return target{}, fmt.Errorf("-url %q has no host", raw)
	}
	addr := u.Host
	if u.Port() == "" {
		addr = net.JoinHostPort(u.Hostname(), "80")
	}
	path := u.EscapedPath()
	if path == "" || path == "/" {
		path = "/v1/evaluate"
	}
	if u.RawQuery != "" {
		path += "?" + u.RawQuery
	}
	return target{network: "tcp", addr: addr, host: u.Host, path: path}, nil
}

func (t target) dial() (net.Conn, error) {
	return net.DialTimeout(t.network, t.addr, 5*time.Second)
}

// requestTimeout bounds one request, so a stuck server ends the run with
// errors rather than hanging it.
const requestTimeout = 10 * time.Second

type workerStats struct {
	latencies []time.Duration
	errors    int
	firstErr  error
	statuses  map[int]int
	allow     int
	deny      int
	other     int
}

// drive runs conc closed-loop workers, each on its own keep-alive
// connection, for warmup (not recorded) and then d.
func drive(ctx context.Context, t target, body []byte, conc int, warmup, d time.Duration, cpu *cpuMeter) *result {
	req := buildRequest(t.host, t.path, body)
	measureFrom := time.Now().Add(warmup)
	end := measureFrom.Add(d)
	if cpu == nil {
		cpu = &cpuMeter{}
	}
	metered := make(chan bool, 1) // whether cpu was started
	go func() {
		select {
		case <-time.After(warmup):
			cpu.start()
			metered <- true
		case <-ctx.Done():
			metered <- false
		}
	}()
	workers := make([]workerStats, conc)
	var wg sync.WaitGroup
	for i := range workers {
		w := &workers[i]
		w.statuses = map[int]int{}
		w.latencies = make([]time.Duration, 0, 1<<15)
		wg.Go(func() {
			c := &conn{dial: t.dial, req: req}
			defer c.close()
			for ctx.Err() == nil {
				t0 := time.Now()
				if t0.After(end) {
					return
				}
				status, respBody, err := c.do(t0.Add(requestTimeout))
				t1 := time.Now()
				if t0.Before(measureFrom) {
					continue
				}
				if err != nil {
					w.errors++
					if w.firstErr == nil {
						w.firstErr = err
					}
					time.Sleep(10 * time.Millisecond) // do not spin on a dead server
					continue
				}
				w.statuses[status]++
				if status != 200 {
					w.errors++
					if w.firstErr == nil {
						w.firstErr = fmt.Errorf("status %d: %s", status, respBody)
					}
					continue
				}
				w.latencies = append(w.latencies, t1.Sub(t0))
				switch decisionOf(respBody) {
				case "allow":
					w.allow++
				case "deny":
					w.deny++
				default:
					w.other++
				}
			}
		})
	}
	wg.Wait()
	if <-metered {
		cpu.stop()
	}
	r := &result{elapsed: time.Since(measureFrom), statuses: map[int]int{}, decisions: map[string]int{}, cpu: cpu}
	for i := range workers {
		w := &workers[i]
		r.latencies = append(r.latencies, w.latencies...)
		r.errors += w.errors
		if r.firstErr == nil {
			r.firstErr = w.firstErr
		}
		for k, v := range w.statuses {
			r.statuses[k] += v
		}
		r.decisions["allow"] += w.allow
		r.decisions["deny"] += w.deny
		if w.other > 0 {
			r.decisions["not a decision"] += w.other
		}
	}
	return r
}

var decisionKey = []byte(`"decision":"`)

func decisionOf(body []byte) string {
	i := bytes.Index(body, decisionKey)
	if i < 0 {
		return ""
	}
	rest := body[i+len(decisionKey):]
	switch {
	case bytes.HasPrefix(rest, []byte(`allow"`)):
		return "allow"
	case bytes.HasPrefix(rest, []byte(`deny"`)):
		return "deny"
	}
	return ""
}
