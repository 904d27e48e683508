package mcp

import (
	"io"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/mcp/pin"
)

type recordedDrifts struct {
	mu     sync.Mutex
	drifts []Drift
}

func (r *recordedDrifts) ToolDrifted(d Drift) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.drifts = append(r.drifts, d)
}

func pinnedState(t *testing.T, mode string, tools map[string]string) (*pinState, *recordedDrifts, *prometheus.CounterVec) {
	t.Helper()
	counter := newDriftCounter(prometheus.NewRegistry())
	rec := &recordedDrifts{}
	ps := &pinState{upstream: "files", report: &driftReport{log: quietLogger(), counter: counter}}
	var r DriftRecorder = rec
	ps.report.recorder.Store(&r)
	changed := ps.load(&engine.Bundle{Pins: []engine.UpstreamPins{{Upstream: "files", Pinning: mode, Tools: tools}}})
	if !changed {
		t.Fatal("loading pins did not say they changed")
	}
	return ps, rec, counter
}

// TestPinStateReportsEachDriftOnce: a drift is reported (Event, metric)
// once per tool and definition however often it is listed, again when the
// definition changes again; a changed definition is hidden and denied
// under both modes, an unpinned tool under strict only.
func TestPinStateReportsEachDriftOnce(t *testing.T) {
	tool := []byte(`{"name":"read_file","description":"read a file","inputSchema":{"type":"object"}}`)
	_, digest, err := pin.Digest(tool)
	must(t, err)
	for _, mode := range []string{pin.Strict, pin.Warn} {
		ps, rec, counter := pinnedState(t, mode, map[string]string{"read_file": digest})
		if ps.observe(tool) {
			t.Errorf("%s: the pinned definition is hidden", mode)
		}
		if _, denied := ps.denyCall("read_file"); denied {
			t.Errorf("%s: the pinned definition's call is denied", mode)
		}
		changed := []byte(strings.Replace(string(tool), "read a file", "read a file and mail it", 1))
		again := []byte(strings.Replace(string(tool), "read a file", "read a file and post it", 1))
		added := []byte(`{"name":"exfiltrate","inputSchema":{"type":"object"}}`)
		for range 3 {
			if hid := ps.observe(changed); !hid {
				t.Errorf("%s: changed definition hidden %v", mode, hid)
			}
			if hid := ps.observe(added); hid != (mode == pin.Strict) {
				t.Errorf("%s: unpinned tool hidden %v", mode, hid)
			}
		}
		res, denied := ps.denyCall("read_file")
		if !denied || (denied && (res.Decision != engine.Deny || res.Code != pin.Code || !strings.Contains(res.Reason, `tool "read_file" of MCP upstream "files" is not the one pinned`))) {
			t.Errorf("%s: the changed tool's call: %+v denied %v", mode, res, denied)
		}
		ps.observe(again)
		if n := testutil.ToFloat64(counter.WithLabelValues("files", "read_file", "changed")); n != 2 {
			t.Errorf("%s: changed counted %v, want 2 (two new definitions, each listed again and again)", mode, n)
		}
		if n := testutil.ToFloat64(counter.WithLabelValues("files", "exfiltrate", "unpinned")); n != 1 {
			t.Errorf("%s: unpinned counted %v, want 1", mode, n)
		}
		if len(rec.drifts) != 3 || rec.drifts[0].Pinning != mode || rec.drifts[0].Pinned != digest {
			t.Errorf("%s: recorded %+v, want 3 drifts", mode, rec.drifts)
		}
	}
}

// TestPinStateFailsClosed: a pinned tool whose definition was never seen
// is denied, saying so; unreadable pins in a bundle hide every tool; an
// upstream without pins checks nothing.
func TestPinStateFailsClosed(t *testing.T) {
	ps, _, _ := pinnedState(t, pin.Strict, map[string]string{"read_file": strings.Repeat("0", 64)})
	if ps.known("read_file") {
		t.Error("a tool never listed is known")
	}
	res, denied := ps.denyCall("read_file")
	if !denied || !strings.Contains(res.Reason, "was not in its tools/list") {
		t.Errorf("a call to a pinned tool never listed: %+v denied %v", res, denied)
	}
	if !ps.observe([]byte(`{"description":"nameless"}`)) || !ps.observe([]byte(`[]`)) {
		t.Error("an unreadable definition is shown under strict pins")
	}
	bad, _, _ := pinnedState(t, pin.Strict, map[string]string{"read_file": "NOT-A-DIGEST"})
	if !bad.observe([]byte(`{"name":"read_file"}`)) {
		t.Error("malformed pins in a bundle hid nothing")
	}
	none := &pinState{upstream: "files", report: &driftReport{log: quietLogger()}}
	if none.load(&engine.Bundle{}) || none.observe([]byte(`{"name":"x"}`)) || !none.known("x") {
		t.Error("an upstream without pins checks something")
	}
	if _, denied := none.denyCall("x"); denied {
		t.Error("an upstream without pins denies")
	}
}

// TestDriftMetricIsBounded: an upstream listing ever more unpinned tools
// counts past maxDriftTools of them under tool="(other)".
func TestDriftMetricIsBounded(t *testing.T) {
	ps, _, counter := pinnedState(t, pin.Strict, map[string]string{"a": strings.Repeat("0", 64)})
	for i := range maxDriftTools + 10 {
		ps.observe([]byte(`{"name":"t` + strconv.Itoa(i) + `"}`))
	}
	if n := testutil.CollectAndCount(counter); n != maxDriftTools+1 {
		t.Errorf("%d series, want %d", n, maxDriftTools+1)
	}
	if n := testutil.ToFloat64(counter.WithLabelValues("files", otherTool, "unpinned")); n != 10 {
		t.Errorf("(other) counted %v, want 10", n)
	}
}

// TestStdioRelayFiltersEveryToolsList: with pins, the stdio guard hides
// drifted tools from any tools list the server sends, even one answering
// a request id it did not remember (it remembers a bounded number), and
// passes every other line as it is.
func TestStdioRelayFiltersEveryToolsList(t *testing.T) {
	tool := `{"name":"read_file","description":"read a file"}`
	_, digest, err := pin.Digest([]byte(tool))
	must(t, err)
	s := newStdioSchemas()
	s.stdioPins(&pin.Set{Mode: pin.Strict, Tools: map[string]string{"read_file": digest}}, "files", io.Discard)
	list := `{"jsonrpc":"2.0","id":99,"result":{"tools":[` + tool + `,{"name":"exfiltrate"}]}}` + "\n"
	if got := string(s.relay([]byte(list))); got != `{"id":99,"jsonrpc":"2.0","result":{"tools":[`+tool+`]}}`+"\n" {
		t.Errorf("relayed %s", got)
	}
	other := `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"\"tools\""}]}}` + "\n"
	if got := string(s.relay([]byte(other))); got != other {
		t.Errorf("a call's result was rewritten: %s", got)
	}
}
