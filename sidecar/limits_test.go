package sidecar

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/toolgate/toolgate/decisionlog"
	"github.com/toolgate/toolgate/engine"
)

// limitedRun runs the whole sidecar (Run) with o, a bundle that denies
// Bash and allows every other tool, and a metrics listener of its own (so
// reading metrics takes no connection from the listener under test). It
// returns the decision and metrics addresses.
func limitedRun(t *testing.T, o Options) (addr, metricsAddr string) {
	t.Helper()
	doc, _ := encode(t, denyTools("Bash"))
	o.BundleFile = filepath.Join(t.TempDir(), "bundle.json")
	must(t, os.WriteFile(o.BundleFile, doc, 0o644))
	o.MetricsListen = "127.0.0.1:0"
	maddr := make(chan net.Addr, 1)
	o.onMetricsListen = func(a net.Addr) { maddr <- a }
	base := startRun(t, o)
	metricsAddr = (<-maddr).String()
	eventually(t, "the bundle loaded", func() bool { return readyRevision(t, "http://"+metricsAddr) != "" })
	return strings.TrimPrefix(base, "http://"), metricsAddr
}

// holdEvaluations makes every request for tool "Hold" wait, inside its
// evaluation, until release is closed; entered receives one value per
// request that is waiting.
func holdEvaluations(o *Options) (entered chan struct{}, release chan struct{}) {
	entered, release = make(chan struct{}, 100), make(chan struct{})
	o.beforeEvaluate = func(req engine.Request) {
		if req["tool_name"] == "Hold" {
			entered <- struct{}{}
			<-release
		}
	}
	return entered, release
}

// rawRequest is an evaluate request as bytes on the wire.
func rawRequest(body string) string {
	return fmt.Sprintf("POST /v1/evaluate HTTP/1.1\r\nHost: sidecar\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
}

// readUntilClosed reads what the server sends until it closes the
// connection, or fails the test after limit.
func readUntilClosed(t *testing.T, c net.Conn, limit time.Duration) (string, time.Duration) {
	t.Helper()
	start := time.Now()
	must(t, c.SetReadDeadline(start.Add(limit)))
	data, err := io.ReadAll(c)
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("the server kept the connection open for %v: %q", limit, data)
	}
	return string(data), time.Since(start)
}

// drip writes one byte every interval until the connection fails or stop
// is closed.
func drip(c net.Conn, b byte, interval time.Duration, stop chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-time.After(interval):
		}
		if _, err := c.Write([]byte{b}); err != nil {
			return
		}
	}
}

// Slowloris: a client that trickles its headers, or its body, a byte at a
// time is cut off by the read timeouts (the header deadline is not reset
// by each byte), gets no decision, and other clients are answered
// meanwhile.
func TestSlowHeadersAndBodiesAreCutByTheTimeouts(t *testing.T) {
	o := testOptions()
	o.ReadHeaderTimeout, o.ReadTimeout, o.WriteTimeout = 300*time.Millisecond, 800*time.Millisecond, time.Second
	addr, _ := limitedRun(t, o)

	for _, tc := range []struct {
		name    string
		opening string
		timeout time.Duration
	}{
		{"headers", "POST /v1/evaluate HTTP/1.1\r\nHost: sidecar\r\nX-Slow: ", o.ReadHeaderTimeout},
		{"body", "POST /v1/evaluate HTTP/1.1\r\nHost: sidecar\r\nContent-Length: 4096\r\n\r\n{\"tool_name\":\"Read\",\"pad\":\"", o.ReadTimeout},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			must(t, err)
			defer c.Close()
			_, err = c.Write([]byte(tc.opening))
			must(t, err)
			stop := make(chan struct{})
			defer close(stop)
			go drip(c, 'x', 50*time.Millisecond, stop)
			// Meanwhile another client is answered.
			if got := toolDecision(t, "http://"+addr, "Bash"); got != "deny" {
				t.Errorf("another client got %s", got)
			}
			got, took := readUntilClosed(t, c, 10*time.Second)
			if took > tc.timeout+2*time.Second {
				t.Errorf("cut after %v, the timeout is %v", took, tc.timeout)
			}
			if strings.Contains(got, `"decision"`) {
				t.Errorf("the slow client got a decision: %q", got)
			}
			t.Logf("a slow %s was cut after %v (timeout %v); the server sent %q", tc.name, took.Round(time.Millisecond), tc.timeout, firstLine(got))
		})
	}
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\r\n")
	return line
}

// A flood of idle and half-sent connections, far beyond --max-connections
// and with timeouts too long to help, does not lock out a client that
// sends its request at once: each new connection evicts the one that has
// waited longest.
func TestAConnectionFloodDoesNotLockOutAClient(t *testing.T) {
	o := testOptions()
	o.MaxConnections = 8
	o.ReadHeaderTimeout, o.ReadTimeout, o.IdleTimeout = time.Minute, time.Minute, time.Minute
	addr, maddr := limitedRun(t, o)

	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for i := range 60 {
		c, err := net.Dial("tcp", addr)
		must(t, err)
		if i%2 == 0 { // half of them start a request and stall
			_, err = c.Write([]byte("POST /v1/evaluate HTTP/1.1\r\nHost: x\r\n"))
			must(t, err)
		}
		flood = append(flood, c)
	}
	eventually(t, "the flood accepted", func() bool {
		return metricValue(t, "http://"+maddr, "toolgate_sidecar_connections_evicted_total") >= 60-8
	})

	start := time.Now()
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Post("http://"+addr+"/v1/evaluate", "application/json", strings.NewReader(`{"tool_name":"Bash"}`))
	must(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if d := decodeDecision(t, body); resp.StatusCode != 200 || d.Decision != engine.Deny {
		t.Fatalf("after the flood: %d %s", resp.StatusCode, body)
	}
	t.Logf("answered in %v behind 60 flooding connections (cap 8)", time.Since(start).Round(time.Microsecond))
	if open := metricValue(t, "http://"+maddr, "toolgate_sidecar_connections_open"); open > 8+1 { // + the metrics scrape
		t.Errorf("%v connections open, the cap is 8", open)
	}
	// The oldest flood connections were the ones closed.
	_, took := readUntilClosed(t, flood[0], 5*time.Second)
	t.Logf("the oldest flooding connection had been closed (read returned after %v)", took)
}

// A client's keep-alive connection, idle between two requests, outlives a
// flood of connections that never sent a whole request: they are evicted
// first, however recently they arrived, so the client's next request on the
// same connection is answered, not reset.
func TestServedConnectionsAreEvictedLast(t *testing.T) {
	o := testOptions()
	o.MaxConnections = 4
	o.ReadHeaderTimeout, o.ReadTimeout, o.IdleTimeout = time.Minute, time.Minute, time.Minute
	addr, maddr := limitedRun(t, o)

	client, err := net.Dial("tcp", addr)
	must(t, err)
	defer client.Close()
	br := bufio.NewReader(client)
	ask := func() string {
		t.Helper()
		must(t, client.SetDeadline(time.Now().Add(5*time.Second)))
		if _, err := client.Write([]byte(rawRequest(`{"tool_name":"Bash"}`))); err != nil {
			t.Fatalf("writing on the kept-alive connection: %v", err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("the kept-alive connection was cut: %v", err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return string(b)
	}
	if got := ask(); !strings.Contains(got, `"decision":"deny"`) {
		t.Fatalf("first answer %q", got)
	}
	time.Sleep(20 * time.Millisecond) // the client's connection is now the oldest
	var flood []net.Conn
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for range 20 {
		c, err := net.Dial("tcp", addr)
		must(t, err)
		_, _ = c.Write([]byte("POST /v1/evaluate HTTP/1.1\r\n"))
		flood = append(flood, c)
	}
	eventually(t, "the flood accepted", func() bool {
		return metricValue(t, "http://"+maddr, "toolgate_sidecar_connections_evicted_total") >= 20-3
	})
	if got := ask(); !strings.Contains(got, `"decision":"deny"`) {
		t.Errorf("second answer on the same connection %q", got)
	}
}

// Connections whose requests are being evaluated are never evicted: when
// every open connection is busy, a new one is refused instead.
func TestBusyConnectionsAreNotEvicted(t *testing.T) {
	o := testOptions()
	o.MaxConnections, o.MaxEvaluations = 2, 4
	entered, release := holdEvaluations(&o)
	addr, maddr := limitedRun(t, o)

	results := make(chan string, 2)
	for range 2 {
		go func() {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				results <- err.Error()
				return
			}
			defer c.Close()
			_, _ = c.Write([]byte(rawRequest(`{"tool_name":"Hold"}`)))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				results <- err.Error()
				return
			}
			b, _ := io.ReadAll(resp.Body)
			results <- string(b)
		}()
	}
	<-entered
	<-entered
	c, err := net.Dial("tcp", addr)
	must(t, err)
	defer c.Close()
	_, _ = c.Write([]byte(rawRequest(`{"tool_name":"Read"}`)))
	if got, _ := readUntilClosed(t, c, 5*time.Second); got != "" {
		t.Errorf("a third connection with two busy at a cap of 2 was answered: %q", got)
	}
	if n := metricValue(t, "http://"+maddr, "toolgate_sidecar_connections_refused_total"); n != 1 {
		t.Errorf("refused %v, want 1", n)
	}
	close(release)
	for range 2 {
		if got := <-results; !strings.Contains(got, `"decision":"allow"`) {
			t.Errorf("a held request ended with %q", got)
		}
	}
}

// Past --max-evaluations a request is denied OVERLOADED at once: never
// allowed, never queued behind the ones being evaluated.
func TestOverloadIsAnImmediateDenyNeverAnAllow(t *testing.T) {
	o := testOptions()
	o.MaxEvaluations = 2
	entered, release := holdEvaluations(&o)
	addr, maddr := limitedRun(t, o)
	base := "http://" + addr

	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { evaluate(t, base, `{"tool_name":"Hold"}`) })
	}
	<-entered
	<-entered
	start := time.Now()
	d := evaluate(t, base, `{"tool_name":"Read"}`) // a tool the bundle allows
	took := time.Since(start)
	if d.Decision != engine.Deny || d.Code != CodeOverloaded || !strings.Contains(d.Reason, "--max-evaluations") {
		t.Errorf("overloaded: %+v", d.Result)
	}
	if took > time.Second {
		t.Errorf("the overload deny took %v", took)
	}
	if series := overloadedDecisions(t, "http://"+maddr); series != 1 {
		t.Errorf("decisions_total{code=OVERLOADED} = %v, want 1", series)
	}
	close(release)
	wg.Wait()
	if got := toolDecision(t, base, "Read"); got != "allow" {
		t.Errorf("once the evaluations ended: %s", got)
	}
}

// A client holding connections that each declare a 1 MiB body and trickle
// it cannot make the sidecar hold more than --max-body-bytes-in-flight of
// bodies: a declared length is reserved before any of it is read, and the
// requests past the budget are denied OVERLOADED at once, never allowed,
// never queued. A small request from another client is still decided
// meanwhile; a body of unknown length reserves as its buffer grows; and the
// budget is free again once the trickling connections go.
func TestBodyBytesInFlightAreBounded(t *testing.T) {
	const budget, size, conns = 3 << 20, 1 << 20, 8
	o := testOptions()
	o.MaxBodyBytesInFlight = budget
	o.ReadHeaderTimeout, o.ReadTimeout, o.IdleTimeout = time.Minute, time.Minute, time.Minute
	var peak atomic.Int64
	o.onBodyReserve = func(n int64) {
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
	}
	addr, maddr := limitedRun(t, o)
	base, mbase := "http://"+addr, "http://"+maddr
	const gauge = "toolgate_sidecar_body_bytes_in_flight"

	type answer struct {
		body string
		took time.Duration
	}
	answers := make(chan answer, conns)
	stop := make(chan struct{})
	var held []net.Conn
	defer func() {
		close(stop)
		for _, c := range held {
			c.Close()
		}
	}()
	opening := fmt.Sprintf("POST /v1/evaluate HTTP/1.1\r\nHost: sidecar\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{\"tool_name\":\"Read\",\"pad\":\"", size)
	start := time.Now()
	for range conns {
		c, err := net.Dial("tcp", addr)
		must(t, err)
		held = append(held, c)
		sent := time.Now()
		_, err = c.Write([]byte(opening))
		must(t, err)
		go drip(c, 'x', 20*time.Millisecond, stop)
		go func() {
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				return // a trickling connection, closed when the test ends
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			answers <- answer{string(b), time.Since(sent)}
		}()
	}
	var slowest time.Duration
	for range conns - budget/size {
		select {
		case a := <-answers:
			d := decodeDecision(t, []byte(a.body))
			if d.Decision != engine.Deny || d.Code != CodeOverloaded || !strings.Contains(d.Reason, "--max-body-bytes-in-flight") {
				t.Errorf("a body past the budget: %s", a.body)
			}
			slowest = max(slowest, a.took)
		case <-time.After(10 * time.Second):
			t.Fatalf("%v after the flood began, not every body past the budget was denied (peak %d bytes in flight, budget %d)", time.Since(start), peak.Load(), budget)
		}
	}
	if slowest > time.Second {
		t.Errorf("an OVERLOADED deny took %v", slowest)
	}
	if v := metricValue(t, mbase, gauge); v != budget {
		t.Errorf("%s = %v with %d bodies of %d bytes being read, want the budget %d", gauge, v, budget/size, size, budget)
	}
	select {
	case a := <-answers:
		t.Errorf("a trickling body within the budget was answered: %s", a.body)
	default:
	}

	// Meanwhile another client's small requests are decided.
	if got := toolDecision(t, base, "Bash"); got != "deny" {
		t.Errorf("Bash meanwhile: %s", got)
	}
	if got := toolDecision(t, base, "Read"); got != "allow" {
		t.Errorf("Read meanwhile: %s", got)
	}
	// A body of unknown length (chunked) past a pooled buffer is refused
	// when its buffer would grow past the budget.
	chunked := func(n int) *http.Response {
		t.Helper()
		head := `{"tool_name":"Read","pad":"`
		body := io.MultiReader(strings.NewReader(head), strings.NewReader(strings.Repeat("x", n-len(head)-2)), strings.NewReader(`"}`))
		resp, err := (&http.Client{Timeout: 5 * time.Second}).Post(base+"/v1/evaluate", "application/json", body)
		must(t, err)
		return resp
	}
	resp := chunked(200 << 10)
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if d := decodeDecision(t, b); d.Decision != engine.Deny || d.Code != CodeOverloaded {
		t.Errorf("a chunked 200 KiB body at the budget: %s", b)
	}
	if n := overloadedDecisions(t, mbase); n != conns-budget/size+1 {
		t.Errorf("decisions_total{code=OVERLOADED} = %v, want %d", n, conns-budget/size+1)
	}
	if p := peak.Load(); p > budget {
		t.Errorf("%d body bytes were in flight, the budget is %d", p, budget)
	}
	t.Logf("%d bodies of 1 MiB trickled against a %d MiB budget: %d denied OVERLOADED within %v of being sent, peak %d bytes in flight",
		conns, budget>>20, conns-budget/size, slowest.Round(time.Microsecond), peak.Load())

	// Once the trickling connections go, the budget is free again: a body
	// of exactly 1 MiB, even chunked, is decided.
	close(stop)
	for _, c := range held {
		c.Close()
	}
	held = nil
	stop = make(chan struct{})
	eventually(t, "the budget released", func() bool { return metricValue(t, mbase, gauge) == 0 })
	resp = chunked(size)
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if d := decodeDecision(t, b); d.Decision != engine.Allow {
		t.Errorf("a chunked 1 MiB body with the budget free: %s", b)
	}
	eventually(t, "the budget released again", func() bool { return metricValue(t, mbase, gauge) == 0 })
}

// overloadedDecisions reads decisions_total{code="OVERLOADED"} from the
// metrics at base.
func overloadedDecisions(t *testing.T, base string) float64 {
	t.Helper()
	var series float64
	for _, line := range strings.Split(getBody(t, base+"/metrics"), "\n") {
		if strings.HasPrefix(line, `toolgate_sidecar_decisions_total{code="OVERLOADED",decision="deny",effect="deny"} `) {
			_, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &series)
			must(t, err)
		}
	}
	return series
}

func getBody(t *testing.T, url string) string {
	t.Helper()
	_, body := get(t, url)
	return body
}

// A request wide in JSON values, not in bytes, is a 400 naming the limit,
// whichever decoder meets it; at the limit it is decided.
func TestWideJSONIsRefusedWith400(t *testing.T) {
	o := testOptions()
	o.MaxRequestElements = 50
	s, base := newTestServer(t, o)
	doc, _ := encode(t, denyTools("Bash"))
	must(t, s.LoadDocument(doc, false))
	wide := func(values int, head string) string {
		return `{"tool_name":"Read"` + head + `,"args":[` + strings.TrimSuffix(strings.Repeat("{},", values-3), ",") + `]}`
	}
	if d := evaluate(t, base, wide(50, "")); d.Decision != engine.Allow {
		t.Errorf("at the limit: %+v", d.Result)
	}
	for name, body := range map[string]string{
		"one over":                    wide(51, ""),
		"a megabyte of empty objects": wide(340_000, ""),
		"on the encoding/json path":   wide(60, `,"s":"\ud83d\ude42"`),
	} {
		status, data := post(t, base+"/v1/evaluate", body)
		assertJSONError(t, status, http.StatusBadRequest, data, "more than 50")
		if !strings.Contains(string(data), "--max-request-elements") {
			t.Errorf("%s: %s", name, data)
		}
	}
	if n := testutil.ToFloat64(s.metrics.BadRequests); n != 3 {
		t.Errorf("bad requests %v, want 3", n)
	}
}

// ?explain=true on a bundle where every rule is reached is bounded by
// --max-trace, says traceTruncated, and decides as without the trace.
func TestExplainTraceIsBoundedBy_MaxTrace(t *testing.T) {
	o := testOptions()
	o.MaxTrace = 10
	s, base := newTestServer(t, o)
	rules := make([]engine.Rule, 200)
	for i := range rules {
		rules[i] = engine.Rule{ID: fmt.Sprintf("r%d", i), Effect: "allow", Conditions: []engine.Condition{
			{Field: "input.command", Operator: "contains", Value: raw("ls")},
			{Field: "input.command", Operator: "contains", Value: raw(fmt.Sprint("x", i))}}}
	}
	rules = append(rules, engine.Rule{ID: "no-rm", Effect: "deny", Conditions: []engine.Condition{
		{Field: "input.command", Operator: "contains", Value: raw("rm")}}})
	doc, _ := encode(t, engine.Bundle{Policies: []engine.Policy{{ID: "p", Version: 1, DefaultEffect: "allow", Rules: rules}}})
	must(t, s.LoadDocument(doc, false))
	req := `{"tool_name":"Bash","input":{"command":"ls; rm -rf /"}}`

	plain := evaluate(t, base, req)
	status, data := post(t, base+"/v1/evaluate?explain=true", req)
	if status != 200 {
		t.Fatalf("%d %s", status, data)
	}
	explained := decodeDecision(t, data)
	entries := 0
	for _, r := range explained.Trace {
		entries += 1 + len(r.Conditions)
	}
	if entries == 0 || entries > 10 || !explained.TraceTruncated || !strings.Contains(string(data), `"traceTruncated":true`) {
		t.Errorf("trace of %d entries (bound 10), truncated %v", entries, explained.TraceTruncated)
	}
	if explained.Decision != plain.Decision || explained.MatchedRuleID != plain.MatchedRuleID || plain.MatchedRuleID != "no-rm" {
		t.Errorf("explained %s by %s, plain %s by %s", explained.Decision, explained.MatchedRuleID, plain.Decision, plain.MatchedRuleID)
	}
	if n := testutil.ToFloat64(s.metrics.TraceTruncated); n != 1 {
		t.Errorf("trace_truncated_total %v", n)
	}
}

// The decision log queue is bounded in bytes: events carrying large logged
// requests fill it long before its event count does, the excess is dropped
// and counted, and every event is either delivered or counted as dropped.
// The control: the same number of small events all fit.
func TestDecisionLogQueueIsBoundedInBytes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		bodyBytes int
		dropped   bool
	}{{"large events", 8 << 10, true}, {"small events", 0, false}} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &sinkRecorder{hold: make(chan struct{})}
			o := testOptions()
			o.DecisionLogQueue, o.DecisionLogQueueBytes, o.DecisionLogBatch = 100_000, 64<<10, 1
			o.LogFields = []string{"*"}
			s := sinkServer(t, o, rec)
			const total = 100
			req := engine.Request{"tool_name": "Write", "input": map[string]any{"content": strings.Repeat("x", tc.bodyBytes)}}
			for i := range total {
				s.d.Record(&decisionlog.Event{At: time.Now(), ID: uint64(i), ToolName: "Write", Decision: engine.Allow,
					Request: req, BodyBytes: tc.bodyBytes})
			}
			dropped := testutil.ToFloat64(s.metrics.logDropped.WithLabelValues("http", "queue_full"))
			held := s.d.Log().HeldBytes()
			if held > int64(o.DecisionLogQueueBytes) {
				t.Errorf("the queue holds %d bytes, bound %d", held, o.DecisionLogQueueBytes)
			}
			if fits := int64(o.DecisionLogQueueBytes) / (decisionlog.EventSize + int64(tc.bodyBytes)); tc.dropped && dropped < float64(total-int(fits)-2) {
				t.Errorf("dropped %v of %d; %d fit in the bytes", dropped, total, fits)
			}
			if !tc.dropped && dropped != 0 {
				t.Errorf("dropped %v small events", dropped)
			}
			close(rec.hold)
			must(t, s.Close(t.Context()))
			if delivered := sum(rec.sizes()); delivered+int(dropped) != total {
				t.Errorf("delivered %d + dropped %v != %d", delivered, dropped, total)
			}
			if left := s.d.Log().HeldBytes(); left != 0 {
				t.Errorf("%d bytes still counted against the drained queue", left)
			}
		})
	}
}
