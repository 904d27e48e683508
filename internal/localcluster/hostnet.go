package localcluster

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"
)

// hostNet is what the host's own network namespace holds: every link, every
// address on it, every route in every table, and IPv4 forwarding. The node
// cluster must never change any of it: its addresses live in namespaces it
// creates (setupHost), and nothing may route off the machine.
type hostNet struct {
	entries []string // sorted: "link tg-x", "addr eth0 192.0.2.2/24", "route main 198.51.100.0/24 dev eth0 via ..."
	forward string
}

// readHostNet reads it through `ip -j`, keeping only what identifies a link,
// an address or a route (not counters or lifetimes, which change by
// themselves). It must run in the host's namespace (RunInNode's process).
func readHostNet() (hostNet, error) {
	var links []struct {
		Name  string `json:"ifname"`
		Addrs []struct {
			Local  string `json:"local"`
			Prefix int    `json:"prefixlen"`
		} `json:"addr_info"`
	}
	if err := ipJSON(&links, "addr", "show"); err != nil {
		return hostNet{}, err
	}
	var h hostNet
	for _, l := range links {
		h.entries = append(h.entries, "link "+l.Name)
		for _, a := range l.Addrs {
			h.entries = append(h.entries, fmt.Sprintf("addr %s %s/%d", l.Name, a.Local, a.Prefix))
		}
	}
	for _, family := range []string{"-4", "-6"} {
		var routes []struct {
			Type, Dst, Gateway, Dev, Table string
		}
		if err := ipJSON(&routes, family, "route", "show", "table", "all"); err != nil {
			return hostNet{}, err
		}
		for _, r := range routes {
			h.entries = append(h.entries, fmt.Sprintf("route %s %s %s dev %s via %s", r.Table, r.Type, r.Dst, r.Dev, r.Gateway))
		}
	}
	slices.Sort(h.entries)
	h.entries = slices.Compact(h.entries)
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_forward")
	if err != nil {
		return hostNet{}, err
	}
	h.forward = strings.TrimSpace(string(b))
	return h, nil
}

func ipJSON(v any, args ...string) error {
	out, err := exec.Command("ip", append([]string{"-j"}, args...)...).Output()
	if err != nil {
		return fmt.Errorf("ip -j %s: %w", strings.Join(args, " "), err)
	}
	if err := json.Unmarshal(out, v); err != nil {
		return fmt.Errorf("ip -j %s: %w", strings.Join(args, " "), err)
	}
	return nil
}

// diff says how now differs from h, or "" when it does not.
func (h hostNet) diff(now hostNet) string {
	var out []string
	for _, e := range now.entries {
		if _, found := slices.BinarySearch(h.entries, e); !found {
			out = append(out, "+ "+e)
		}
	}
	for _, e := range h.entries {
		if _, found := slices.BinarySearch(now.entries, e); !found {
			out = append(out, "- "+e)
		}
	}
	if h.forward != now.forward {
		out = append(out, fmt.Sprintf("net.ipv4.ip_forward %s -> %s", h.forward, now.forward))
	}
	return strings.Join(out, "; ")
}

// hostNetGuard watches the host's network while the node cluster runs,
// every interval, and keeps the first change it sees.
type hostNetGuard struct {
	before hostNet
	stop   chan struct{}
	done   sync.WaitGroup
	mu     sync.Mutex
	seen   string
}

func guardHostNet(interval time.Duration) (*hostNetGuard, error) {
	before, err := readHostNet()
	if err != nil {
		return nil, err
	}
	g := &hostNetGuard{before: before, stop: make(chan struct{})}
	g.done.Add(1)
	go func() {
		defer g.done.Done()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-g.stop:
				return
			case <-t.C:
				g.check()
			}
		}
	}()
	return g, nil
}

func (g *hostNetGuard) check() {
	now, err := readHostNet()
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen != "" {
		return
	}
	if err != nil {
		g.seen = err.Error()
	} else if d := g.before.diff(now); d != "" {
		g.seen = d
	}
}

// finish stops watching, checks once more (after teardown: everything must
// be as before) and returns the first change seen, or "".
func (g *hostNetGuard) finish() string {
	close(g.stop)
	g.done.Wait()
	g.check()
	return g.seen
}
