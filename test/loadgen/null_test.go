package main

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

func TestNullServerFlagsAreChecked(t *testing.T) {
	cases := map[string][]string{
		"no port":            {"-null-server", "127.0.0.1"},
		"with -url":          {"-null-server", "127.0.0.1:0", "-url", "http://127.0.0.1:1"},
		"with -self":         {"-null-server", "127.0.0.1:0", "-self"},
		"with -write-bundle": {"-null-server", "127.0.0.1:0", "-write-bundle", "x.json"},
	}
	for name, args := range cases {
		var out, errOut bytes.Buffer
		if code := run(t.Context(), args, &out, &errOut); code != 2 || !strings.Contains(errOut.String(), "-null-server") {
			t.Errorf("%s: exit %d, stderr %q; want 2 naming -null-server", name, code, errOut.String())
		}
	}
}

// TestNullServerAnswersOverKeepAlive drives the null server with the load
// generator's own client, as make compare-opa-server does.
func TestNullServerAnswersOverKeepAlive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- serveNull(ctx, ln) }()
	tg, err := parseTarget("http://" + ln.Addr().String() + "/v1/evaluate")
	if err != nil {
		t.Fatal(err)
	}
	r := drive(t.Context(), tg, []byte(sampleBody), 2, 0, 200*time.Millisecond, nil)
	if r.errors > 0 || len(r.latencies) == 0 || r.decisions["deny"] != len(r.latencies) {
		t.Fatalf("errors %d (%v), answers %d, decisions %v", r.errors, r.firstErr, len(r.latencies), r.decisions)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serveNull: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serveNull did not return after its context ended")
	}
}

func TestNullServerRefusesWhatItCannotFrame(t *testing.T) {
	cases := map[string]string{
		"HTTP/1.0":             "POST / HTTP/1.0\r\nContent-Length: 0\r\n\r\n",
		"no version":           "POST /\r\n\r\n",
		"header without colon": "POST / HTTP/1.1\r\nHost x\r\n\r\n",
		"chunked":              "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
		"length not a number":  "POST / HTTP/1.1\r\nContent-Length: ten\r\n\r\n",
		"negative length":      "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
		"signed length":        "POST / HTTP/1.1\r\nContent-Length: +1\r\n\r\nx",
		"repeated length":      "POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
		"huge length":          "POST / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n",
		"head too long":        "POST / HTTP/1.1\r\nX: " + strings.Repeat("a", maxNullHead) + "\r\n\r\n",
	}
	for name, raw := range cases {
		var out bytes.Buffer
		serveNullConn(strings.NewReader(raw), &out)
		status, keep, body, err := readResponse(bufio.NewReader(&out), nil)
		if err != nil || status != 400 || keep || !bytes.Contains(body, []byte("malformed request")) {
			t.Errorf("%s: status %d keep-alive %v body %q err %v; want 400, closed, naming the mistake", name, status, keep, body, err)
		}
	}
	// A connection that ends, mid-head or between requests, gets nothing.
	for _, raw := range []string{"", "POST / HTTP/1.1\r\nHost: x\r\n"} {
		var out bytes.Buffer
		serveNullConn(strings.NewReader(raw), &out)
		if out.Len() != 0 {
			t.Errorf("%q: answered %q", raw, out.String())
		}
	}
	// Two requests on one connection get two answers.
	var out bytes.Buffer
	req := "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\ncontent-length: 2\r\n\r\n{}"
	serveNullConn(strings.NewReader(req+req), &out)
	if got := bytes.Count(out.Bytes(), []byte("HTTP/1.1 200 OK")); got != 2 {
		t.Errorf("two requests: %d answers: %q", got, out.String())
	}
}
