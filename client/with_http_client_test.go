package client_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/toolgate/toolgate/client"
	"github.com/toolgate/toolgate/client/internal/clienttest"
)

// countingTransport stands for what callers wrap the client's transport
// with (tracing, metrics): it counts the requests it carries.
type countingTransport struct {
	base http.RoundTripper
	n    atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.base.RoundTrip(r)
}

// TestWithHTTPClient: a caller's *http.Client carries every decision (its
// Transport wraps a real one to the real sidecar); one without a Transport
// gets the client's own, which dials the socket; nil is refused.
func TestWithHTTPClient(t *testing.T) {
	sc := clienttest.StartSidecar(t, clienttest.SampleBundle(t), nil)
	tr := &countingTransport{base: http.DefaultTransport}
	c, err := client.New(client.Options{URL: sc.TCP}, client.WithHTTPClient(&http.Client{Transport: tr}))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for range 3 {
		if res, err := c.Evaluate(context.Background(), client.Request{ToolName: "Read", AgentID: "coder-1"}); err != nil || !res.Allowed() {
			t.Fatalf("through the caller's client: %+v %v", res, err)
		}
	}
	if n := tr.n.Load(); n != 3 {
		t.Errorf("the caller's transport carried %d requests, want 3", n)
	}

	socket, err := client.New(client.Options{URL: sc.Unix}, client.WithHTTPClient(&http.Client{}))
	if err != nil {
		t.Fatal(err)
	}
	defer socket.Close()
	if res, err := socket.Evaluate(context.Background(), client.Request{ToolName: "Read", AgentID: "coder-1"}); err != nil || !res.Allowed() {
		t.Errorf("a client without a Transport, over the socket: %+v %v", res, err)
	}

	if _, err := client.New(client.Options{URL: sc.TCP}, client.WithHTTPClient(nil)); err == nil || !strings.Contains(err.Error(), "WithHTTPClient(nil)") {
		t.Errorf("WithHTTPClient(nil): %v", err)
	}
}
