package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/sidecar"
)

func TestPercentileIsNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 1000; i++ {
		d = append(d, time.Duration(i)*time.Microsecond)
	}
	cases := map[float64]time.Duration{50: 500 * time.Microsecond, 99: 990 * time.Microsecond,
		99.9: 999 * time.Microsecond, 100: time.Millisecond, 0: time.Microsecond}
	for p, want := range cases {
		if got := percentile(d, p); got != want {
			t.Errorf("p%v = %v, want %v", p, got, want)
		}
	}
	if got := percentile(nil, 99); got != 0 {
		t.Errorf("empty: %v", got)
	}
	if got := percentile(d[:1], 99.9); got != time.Microsecond {
		t.Errorf("one sample: %v", got)
	}
}

func TestReadResponse(t *testing.T) {
	good := []struct {
		name, raw, body string
		status          int
		keepAlive       bool
	}{
		{"content-length", "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 5\r\n\r\nhello", "hello", 200, true},
		{"case-insensitive headers", "HTTP/1.1 400 Bad Request\r\ncontent-length: 2\r\n\r\n{}", "{}", 400, true},
		{"chunked", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nTrailer: x\r\n\r\n", "abcde", 200, true},
		{"connection close", "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", "", 200, false},
		{"HTTP/1.0", "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", "x", 200, false},
	}
	for _, tc := range good {
		status, keep, body, err := readResponse(bufio.NewReader(strings.NewReader(tc.raw)), nil)
		if err != nil || status != tc.status || keep != tc.keepAlive || string(body) != tc.body {
			t.Errorf("%s: status %d keepAlive %v body %q err %v", tc.name, status, keep, body, err)
		}
	}
	bad := map[string]string{
		"empty":                     "",
		"garbage status line":       "SSH-2.0-OpenSSH\r\n\r\n",
		"short status line":         "HTTP/1.1 20\r\n",
		"non-numeric status":        "HTTP/1.1 abc OK\r\n\r\n",
		"header without colon":      "HTTP/1.1 200 OK\r\nbroken header\r\n\r\n",
		"negative length":           "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"non-numeric length":        "HTTP/1.1 200 OK\r\nContent-Length: ten\r\n\r\n",
		"truncated body":            "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
		"headers cut off":           "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n",
		"no framing":                "HTTP/1.1 200 OK\r\n\r\nbody",
		"unsupported encoding":      "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n",
		"bad chunk size":            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"chunk without CRLF":        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabcXX0\r\n\r\n",
		"chunked without last":      "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n",
		"chunked trailer cut short": "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n",
	}
	for name, raw := range bad {
		if _, _, _, err := readResponse(bufio.NewReader(strings.NewReader(raw)), nil); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestParseTarget(t *testing.T) {
	good := map[string]target{
		"http://127.0.0.1:8181":                  {"tcp", "127.0.0.1:8181", "127.0.0.1:8181", "/v1/evaluate"},
		"http://localhost:8181/":                 {"tcp", "localhost:8181", "localhost:8181", "/v1/evaluate"},
		"http://localhost/v1/evaluate?explain=1": {"tcp", "localhost:80", "localhost", "/v1/evaluate?explain=1"},
		"unix:/run/toolgate.sock":                {"unix", "/run/toolgate.sock", "sidecar", "/v1/evaluate"},
		"unix:///var/run/toolgate/toolgate.sock": {"unix", "/var/run/toolgate/toolgate.sock", "sidecar", "/v1/evaluate"},
	}
	for raw, want := range good {
		if got, err := parseTarget(raw); err != nil || got != want {
			t.Errorf("%s: %+v %v, want %+v", raw, got, err, want)
		}
	}
	for _, raw := range []string{"https://x:1", "ftp://x", "http://", "unix:", "unix://", "unix://host/x.sock", "127.0.0.1:8181", "http://[::1"} {
		if _, err := parseTarget(raw); err == nil {
			t.Errorf("%s: accepted", raw)
		}
	}
}

func TestMalformedFlagsAndBodies(t *testing.T) {
	t.Setenv("TOOLGATE_URL", "") // "neither -url nor -self" must not find one
	dir := t.TempDir()
	notJSON := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(notJSON, []byte(`{"tool_name":`), 0o600); err != nil {
		t.Fatal(err)
	}
	noTool := filepath.Join(dir, "notool.json")
	if err := os.WriteFile(noTool, []byte(`{"agent_id":"a"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	opaNoTool := filepath.Join(dir, "opa-notool.json")
	if err := os.WriteFile(opaNoTool, []byte(`{"input":{"agent_id":"a"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := map[string][]string{
		"OPA body without tool_name": {"-self", "-body", opaNoTool},
		"neither -url nor -self":     {},
		"both -url and -self":        {"-self", "-url", "http://127.0.0.1:1"},
		"zero concurrency":           {"-self", "-c", "0"},
		"zero duration":              {"-self", "-d", "0s"},
		"negative warm-up":           {"-self", "-warmup", "-1s"},
		"too many rules":             {"-self", "-rules", "1001"},
		"bad log mode":               {"-self", "-self-log", "stdout"},
		"https url":                  {"-url", "https://127.0.0.1:1"},
		"extra argument":             {"-self", "now"},
		"unknown flag":               {"-self", "-n", "5"},
		"missing body file":          {"-self", "-body", filepath.Join(dir, "nope.json")},
		"body not JSON":              {"-self", "-body", notJSON},
		"body without tool_name":     {"-self", "-body", noTool},
		"unknown -via":               {"-self", "-via", "udp"},
		"-via without -self":         {"-url", "http://127.0.0.1:1", "-via", "unix"},
		"negative -slow":             {"-self", "-slow", "-1"},
		"huge -slow":                 {"-self", "-slow", "1000000"},
		"zero -slow-interval":        {"-self", "-slow", "10", "-slow-interval", "0s"},
		"negative -server-pid":       {"-url", "http://127.0.0.1:1", "-server-pid", "-1"},
		"-server-pid not running":    {"-url", "http://127.0.0.1:1", "-server-pid", "999999999"},
		"-server-pid with -self":     {"-self", "-server-pid", "1"},
	}
	for name, args := range cases {
		var out, errOut bytes.Buffer
		if code := run(t.Context(), args, &out, &errOut); code != 2 {
			t.Errorf("%s: exit %d, want 2 (stderr %q)", name, code, errOut.String())
		}
		if out.Len() > 0 {
			t.Errorf("%s: measured anyway: %s", name, out.String())
		}
	}
}

func TestWriteBundleWritesAValidBundle(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bundle.json")
	if code := run(t.Context(), []string{"-write-bundle", path, "-rules", "10"}, &bytes.Buffer{}, &bytes.Buffer{}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b, err := engine.Decode(doc)
	if err != nil || len(b.Policies) != 1 || len(b.Policies[0].Rules) != 10 {
		t.Fatalf("bundle: %v %+v", err, b)
	}
	c, _ := engine.Compile(b)
	req, _ := engine.DecodeRequest([]byte(strings.Replace(sampleBody, "_500", "_5", 2)))
	if res := c.Evaluate(req, engine.EvalOptions{}); res.Decision != engine.Deny || res.MatchedRuleID != "r5" {
		t.Errorf("the sample request against rule 5: %+v", res)
	}
}

// TestSelfRun drives an in-process sidecar briefly: a smoke test of the
// whole program, not a performance measurement.
func TestSelfRun(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"-self", "-c", "2", "-d", "300ms", "-warmup", "0s"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"errors 0", "throughput", "p99 ", "decisions map[allow:0 deny:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// -slow measures the same sidecar twice, the second time beside
// connections that never finish a request, and prints both side by side;
// -via unix drives the socket.
func TestSlowRunReportsBothSideBySide(t *testing.T) {
	var out, errOut bytes.Buffer
	code := run(t.Context(), []string{"-self", "-via", "unix", "-c", "2", "-d", "300ms", "-warmup", "0s",
		"-slow", "30", "-slow-interval", "50ms"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"toolgate.sock", "--- without slow connections", "--- with 30 slow connections", "--- side by side", "p99 "} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// An injected Pod's TOOLGATE_URL is where loadgen goes without -url.
func TestURLDefaultsToTOOLGATE_URL(t *testing.T) {
	t.Setenv("TOOLGATE_URL", "unix:///var/run/toolgate/toolgate.sock")
	c, err := parseFlags(nil, io.Discard)
	if err != nil || c.url != "unix:///var/run/toolgate/toolgate.sock" {
		t.Errorf("url %q, %v", c.url, err)
	}
}

func TestRunAgainstADeadServerFails(t *testing.T) {
	var out bytes.Buffer
	code := run(t.Context(), []string{"-url", "http://127.0.0.1:1", "-d", "100ms", "-warmup", "0s", "-c", "1"}, &out, &bytes.Buffer{})
	if code != 1 || !strings.Contains(out.String(), "first error") {
		t.Errorf("exit %d, output:\n%s", code, out.String())
	}
}

func TestDrivesASidecarOnAUnixSocket(t *testing.T) {
	dir := t.TempDir()
	bundle := filepath.Join(dir, "bundle.json")
	doc, err := generateBundle(1000)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bundle, doc, 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "sidecar.sock")
	o := sidecar.DefaultOptions()
	o.Listen, o.BundleFile, o.DecisionLog = []string{"unix:" + sock}, bundle, sidecar.DecisionLogNone
	o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	listening := make(chan struct{})
	go func() { done <- sidecar.Run(ctx, o, func(net.Addr) { close(listening) }) }()
	<-listening
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	var out bytes.Buffer
	code := run(t.Context(), []string{"-url", "unix:" + sock, "-c", "2", "-d", "200ms", "-warmup", "100ms"}, &out, &bytes.Buffer{})
	if code != 0 || !strings.Contains(out.String(), "deny:") {
		t.Errorf("exit %d:\n%s", code, out.String())
	}
}
