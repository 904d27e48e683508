package sidecar

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Helpers of the tests of what the proxy accepts (proxy_methods_test.go,
// proxy_encodings_test.go, proxy_headernames_test.go,
// proxy_upgrade_test.go): the agent's requests are written byte by byte,
// as code in the agent's place would, and the upstream counts what it ran.

// agentRequest builds a request to target as raw bytes: the headers as
// given (names spelled exactly), Connection: close unless they have a
// Connection header, then the body, framed by Content-Length unless a
// Transfer-Encoding header is among them.
func agentRequest(method, target string, headers []string, body string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s HTTP/1.1\r\nHost: sidecar\r\n", method, target)
	framed, connection := false, false
	for _, h := range headers {
		b.WriteString(h + "\r\n")
		framed = framed || strings.HasPrefix(strings.ToLower(h), "transfer-encoding:")
		connection = connection || strings.HasPrefix(strings.ToLower(h), "connection:")
	}
	if !connection {
		b.WriteString("Connection: close\r\n")
	}
	if !framed && body != "" {
		fmt.Fprintf(&b, "Content-Length: %d\r\n", len(body))
	}
	b.WriteString("\r\n" + body)
	return b.String()
}

// tcpDial dials the TCP address of proxy (an http:// URL).
func tcpDial(t *testing.T, proxy string) func() (net.Conn, error) {
	t.Helper()
	u, err := url.Parse(proxy)
	must(t, err)
	return func() (net.Conn, error) { return net.Dial("tcp", u.Host) }
}

// exchange sends raw on a new connection and reads the one answer.
func exchange(t *testing.T, dial func() (net.Conn, error), raw string) (*http.Response, string) {
	t.Helper()
	c, err := dial()
	must(t, err)
	defer c.Close()
	_, err = io.WriteString(c, raw)
	must(t, err)
	must(t, c.SetDeadline(time.Now().Add(20*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer to %q: %v", raw, err)
	}
	return resp, readAll(t, resp)
}

// refusedByToolgate fails unless the answer is status, written by the
// proxy itself (a JSON-RPC error naming toolgate) and saying want.
func refusedByToolgate(t testing.TB, what string, resp *http.Response, body string, status int, want string) {
	t.Helper()
	var answer struct {
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal([]byte(body), &answer)
	if resp.StatusCode != status || answer.Error == nil || !strings.HasPrefix(answer.Error.Message, "toolgate: ") ||
		!strings.Contains(answer.Error.Message, want) {
		t.Errorf("%s: %d %s; want %d from toolgate saying %q", what, resp.StatusCode, strings.TrimSpace(body), status, want)
	}
}

// toolCall is a tools/call of tool on path, as JSON-RPC.
func toolCall(tool, path string) string {
	return fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":{"path":%q}}}`, tool, path)
}

// loggedCalls counts the rig's decision log lines of tool called on path.
func (r *mcpRig) loggedCalls(tool, path string) int {
	n := 0
	for _, l := range r.logs.lines(r.t) {
		req, _ := l["request"].(map[string]any)
		input, _ := req["input"].(map[string]any)
		if l["tool_name"] == tool && input["path"] == path {
			n++
		}
	}
	return n
}

// loggedOnce waits for the decision log line of tool called on path and
// fails unless it is the only one; none of refused (paths of calls never
// decided) may be logged at all. Lines are written in decision order, so
// once the last call's is there, every earlier one would be.
func (r *mcpRig) loggedOnce(tool, path string, refused []string) {
	r.t.Helper()
	eventually(r.t, "the call on "+path+" is logged", func() bool { return r.loggedCalls(tool, path) > 0 })
	if n := r.loggedCalls(tool, path); n != 1 {
		r.t.Errorf("the call of %s on %s has %d decision log lines, want 1", tool, path, n)
	}
	for _, l := range r.logs.lines(r.t) {
		req, _ := l["request"].(map[string]any)
		input, _ := req["input"].(map[string]any)
		for _, p := range refused {
			if strings.Contains(fmt.Sprint(input["path"]), p) {
				r.t.Errorf("a refused request (path %q) has a decision log line: %v", p, l)
			}
		}
	}
}

// callCounter is the record of an upstream written in Go for one test:
// the tool calls it ran, by tool, and the request methods it saw.
type callCounter struct {
	mu      sync.Mutex
	calls   map[string]int
	methods map[string]int
}

func newCallCounter() *callCounter {
	return &callCounter{calls: map[string]int{}, methods: map[string]int{}}
}

func (c *callCounter) saw(method string) {
	c.mu.Lock()
	c.methods[method]++
	c.mu.Unlock()
}

// call runs a tools/call body, as a Go server would read it
// (encoding/json), and returns the JSON-RPC answer.
func (c *callCounter) call(body []byte) []byte {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	if json.Unmarshal(body, &msg) == nil && msg.Method == "tools/list" && len(msg.ID) > 0 {
		// What the proxy lists to learn a tool's inputSchema before it
		// forwards arguments to it: every tool these tests call takes a path.
		var tools []string
		for _, name := range []string{"read_file", "delete_file", "pay", "switch"} {
			tools = append(tools, fmt.Sprintf(`{"name":%q,"inputSchema":{"type":"object","properties":{"path":{"type":"string"}}}}`, name))
		}
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[%s]}}`, msg.ID, strings.Join(tools, ","))
	}
	if json.Unmarshal(body, &msg) != nil || msg.Method != "tools/call" || len(msg.ID) == 0 {
		return []byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"upstream: not a tools/call"}}`)
	}
	c.mu.Lock()
	c.calls[msg.Params.Name]++
	c.mu.Unlock()
	return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"ran %s"}]}}`, msg.ID, msg.Params.Name)
}

// run answers w with what call returns for r's body.
func (c *callCounter) run(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(c.call(body))
}

func (c *callCounter) ran() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.calls {
		out[k] = v
	}
	return out
}

func (c *callCounter) seen() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for k, v := range c.methods {
		out[k] = v
	}
	return out
}
