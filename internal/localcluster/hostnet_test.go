package localcluster

import (
	"slices"
	"strings"
	"testing"
)

func TestHostNetDiff(t *testing.T) {
	before := hostNet{entries: []string{"addr eth0 192.0.2.2/24", "addr lo 127.0.0.1/8", "link eth0", "link lo"}, forward: "0"}
	if d := before.diff(before); d != "" {
		t.Errorf("no change reads as %q", d)
	}
	cases := []struct {
		now  hostNet
		want string
	}{
		{hostNet{entries: append([]string{"addr eth0 198.51.100.7/32"}, before.entries...), forward: "0"}, "+ addr eth0 198.51.100.7/32"},
		{hostNet{entries: []string{"addr lo 127.0.0.1/8", "link eth0", "link lo"}, forward: "0"}, "- addr eth0 192.0.2.2/24"},
		{hostNet{entries: before.entries, forward: "1"}, "net.ipv4.ip_forward 0 -> 1"},
	}
	for _, c := range cases {
		slices.Sort(c.now.entries)
		if d := before.diff(c.now); !strings.Contains(d, c.want) {
			t.Errorf("diff %q, want it to name %q", d, c.want)
		}
	}
}

// readHostNet sees this namespace's loopback: the guard reads what it
// compares.
func TestReadHostNet(t *testing.T) {
	h, err := readHostNet()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"link lo", "addr lo 127.0.0.1/8"} {
		if _, found := slices.BinarySearch(h.entries, want); !found {
			t.Errorf("%q missing from %v", want, h.entries)
		}
	}
	if h.forward != "0" && h.forward != "1" {
		t.Errorf("ip_forward %q", h.forward)
	}
	again, err := readHostNet()
	if err != nil {
		t.Fatal(err)
	}
	if d := h.diff(again); d != "" {
		t.Errorf("two reads of an unchanged host differ: %s", d)
	}
}
