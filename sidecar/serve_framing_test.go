package sidecar

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The --listen addresses are served by httploop, not net/http (a decision
// costs half the CPU: docs/performance.md). Every request below, well
// formed or not, is sent to the same Server behind both, and each must
// get the same answers: the same statuses, the same decisions and JSON
// errors, the same number of answers before the connection ends.
func TestDecisionListenersAnswerAsNetHTTPDid(t *testing.T) {
	o := testOptions()
	s, err := New(o)
	must(t, err)
	t.Cleanup(func() { _ = s.Close(t.Context()) })
	doc, _ := encode(t, denyTools("Bash"))
	must(t, s.LoadDocument(doc, false))

	netHTTP := serveOn(t, s.httpServer(s))
	loop := serveOn(t, s.decisionServer())

	body := `{"tool_name":"Bash","agent_id":"a"}`
	allowed := `{"tool_name":"Read"}`
	big := strings.Repeat("x", 20<<10)
	cases := map[string]string{
		"plain":                 rawRequest(body),
		"pipelined":             rawRequest(body) + rawRequest(allowed) + rawRequest(body),
		"lower-case headers":    "POST /v1/evaluate HTTP/1.1\r\nhost: x\r\ncontent-length: 20\r\n\r\n" + allowed,
		"explain":               "POST /v1/evaluate?explain=true HTTP/1.1\r\nHost: x\r\nContent-Length: 35\r\n\r\n" + body,
		"explain not a bool":    "POST /v1/evaluate?explain=maybe HTTP/1.1\r\nHost: x\r\nContent-Length: 35\r\n\r\n" + body,
		"query not a query":     "POST /v1/evaluate?explain=%zz HTTP/1.1\r\nHost: x\r\nContent-Length: 35\r\n\r\n" + body,
		"chunked":               "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n23\r\n" + body + "\r\n0\r\n\r\n",
		"bad chunk":             "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n" + body + "\r\n0\r\n\r\n",
		"expect 100-continue":   "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 35\r\n\r\n" + body,
		"expect something else": "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nExpect: 200-ok\r\nContent-Length: 35\r\n\r\n" + body,
		"HTTP/1.0":              "POST /v1/evaluate HTTP/1.0\r\nContent-Length: 35\r\n\r\n" + body + rawRequest(body),
		"HTTP/1.0 keep-alive":   "POST /v1/evaluate HTTP/1.0\r\nConnection: keep-alive\r\nContent-Length: 35\r\n\r\n" + body,
		"connection close":      "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 35\r\n\r\n" + body + rawRequest(body),
		"GET evaluate":          "GET /v1/evaluate HTTP/1.1\r\nHost: x\r\n\r\n",
		"probes":                "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /readyz HTTP/1.1\r\nHost: x\r\n\r\nPOST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
		"HEAD":                  "HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
		"malformed host":        "POST /v1/evaluate HTTP/1.1\r\nHost: a b\r\nContent-Length: 35\r\n\r\n" + body,
		"host with a slash":     "POST /v1/evaluate HTTP/1.1\r\nHost: a/b\r\nContent-Length: 35\r\n\r\n" + body,
		"control in a value":    "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nX-A: a\x01b\r\nContent-Length: 35\r\n\r\n" + body,
		"unknown path":          "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n",
		"not JSON":              "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n{\"a\":",
		"no tool":               "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}",
		"empty body":            "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n",
		"no length":             "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\n\r\n",
		"body longer than said": "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nContent-Length: 20\r\n\r\n" + allowed + "garbage\r\n\r\n",
		"body cut short":        "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nContent-Length: 99\r\n\r\n" + body,
		"declared too long":     "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nContent-Length: 999999999\r\n\r\n" + body,
		"no host":               "POST /v1/evaluate HTTP/1.1\r\nContent-Length: 35\r\n\r\n" + body,
		"two hosts":             "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nHost: y\r\nContent-Length: 35\r\n\r\n" + body,
		"two lengths":           "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nContent-Length: 35\r\nContent-Length: 36\r\n\r\n" + body,
		"same length twice":     "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nContent-Length: 35\r\nContent-Length: 35\r\n\r\n" + body,
		"signed length":         "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nContent-Length: +35\r\n\r\n" + body,
		"length and chunked":    "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nContent-Length: 35\r\nTransfer-Encoding: chunked\r\n\r\n23\r\n" + body + "\r\n0\r\n\r\n",
		"unknown encoding":      "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n",
		"garbage":               "GARBAGE\r\n\r\n",
		"bare LF":               "POST /v1/evaluate HTTP/1.1\nHost: x\nContent-Length: 35\n\n" + body,
		"folded header":         "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n 2\r\nContent-Length: 35\r\n\r\n" + body,
		"space before colon":    "POST /v1/evaluate HTTP/1.1\r\nHost : x\r\nContent-Length: 35\r\n\r\n" + body,
		"HTTP/2.0":              "POST /v1/evaluate HTTP/2.0\r\nHost: x\r\nContent-Length: 35\r\n\r\n" + body,
		"absolute target":       "POST http://x/v1/evaluate HTTP/1.1\r\nHost: y\r\nContent-Length: 35\r\n\r\n" + body,
		"escaped path":          "POST /v1/%65valuate HTTP/1.1\r\nHost: x\r\nContent-Length: 35\r\n\r\n" + body,
		"headers too large":     "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nX-Big: " + big + "\r\nContent-Length: 35\r\n\r\n" + body,
		"traceparent":           "POST /v1/evaluate HTTP/1.1\r\nHost: x\r\nTraceparent: 00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01\r\nContent-Length: 35\r\n\r\n" + body,
	}
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			want := answersTo(t, netHTTP, raw)
			got := answersTo(t, loop, raw)
			if !slicesEqual(got, want) {
				t.Errorf("httploop answered\n%s\nnet/http answered\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
		})
	}
}

func slicesEqual(a, b []string) bool {
	return strings.Join(a, "\x00") == strings.Join(b, "\x00")
}

// serveOn serves srv on a loopback port until the test ends.
func serveOn(t *testing.T, srv server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		_ = srv.Shutdown(t.Context())
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve: %v", err)
		}
	})
	return ln.Addr().String()
}

// answersTo sends raw, says it sends no more, and describes each answer
// until the server closes: its status and, for JSON, its fields without
// the ones that differ per call (latency, decision id).
func answersTo(t *testing.T, addr, raw string) []string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	must(t, err)
	defer c.Close()
	_, err = io.WriteString(c, raw)
	must(t, err)
	_ = c.(*net.TCPConn).CloseWrite() // fails when the server has already closed (headers too large)
	data, _ := readUntilClosed(t, c, 10*time.Second)
	br := bufio.NewReader(strings.NewReader(data))
	var answers []string
	var req *http.Request
	if strings.HasPrefix(raw, "HEAD ") {
		req = &http.Request{Method: http.MethodHead}
	}
	for {
		if _, err := br.Peek(1); err == io.EOF {
			return answers // the server closed after its last answer
		}
		resp, err := http.ReadResponse(br, req)
		if err != nil {
			if !errors.Is(err, io.EOF) {
				answers = append(answers, "unreadable: "+err.Error())
			}
			return answers
		}
		b, _ := io.ReadAll(resp.Body)
		desc := strconv.Itoa(resp.StatusCode)
		if req != nil { // a HEAD answer's length is all it says; elsewhere it holds a latency
			desc += " length " + strconv.FormatInt(resp.ContentLength, 10)
		}
		var fields map[string]any
		if resp.Header.Get("Content-Type") == "application/json" && json.Unmarshal(b, &fields) == nil {
			delete(fields, "latencyMs")
			delete(fields, "decisionId")
			j, _ := json.Marshal(fields)
			desc += " " + string(j)
		} else {
			desc += " " + string(b) // net/http's plain-text refusals: "400 Bad Request: why"
		}
		answers = append(answers, desc)
	}
}

// A handler's Connection: close closes the connection after its answer,
// as net/http did: the sidecar says it when it stops reading a body at
// --max-body-bytes-in-flight, and the rest of that body must never be
// read as the next request.
func TestAHandlersConnectionCloseClosesTheConnection(t *testing.T) {
	o := testOptions()
	s, err := New(o)
	must(t, err)
	t.Cleanup(func() { _ = s.Close(t.Context()) })
	srv := s.decisionServer()
	srv.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Connection", "close")
		_, _ = io.WriteString(w, "unread body left")
	})
	addr := serveOn(t, srv)
	raw := "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 30\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n" + rawRequest(`{"tool_name":"Bash"}`)
	got := answersTo(t, addr, raw)
	if len(got) != 1 || got[0] != "200 unread body left" {
		t.Fatalf("answers %q, want one, then the connection closed", got)
	}
}
