package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/engine/decision"
)

// DefaultTimeout bounds one call: the sidecar decides in microseconds, so
// half a second means it is not answering, and an agent should not hang.
const DefaultTimeout = 500 * time.Millisecond

// maxAnswer bounds the answer read: a call's decision is well under 1
// KiB (an explain trace is not asked for), a result's carries the output
// as delivered, at most the sidecar's request limit (1 MiB) grown by its
// redaction marks.
const maxAnswer = 4 << 20

// Options configure a Client.
type Options struct {
	// URL is unix:///path/to.sock or http://host:port. Empty: TOOLGATE_URL,
	// else DefaultSocket when it exists, else DefaultURL.
	URL string
	// Timeout bounds each Evaluate; zero means DefaultTimeout.
	Timeout time.Duration
	// FailOpen allows, instead of denying, when the sidecar gives no
	// decision, and counts each such allow (FailOpenCount). It is off by
	// default: an unreachable guard must not wave every call through.
	FailOpen bool
}

// Client asks a sidecar for decisions over kept-alive connections. It is
// safe for concurrent use; make one and share it.
type Client struct {
	http     *http.Client
	evalURL  string
	where    string
	timeout  time.Duration
	failOpen bool
	opened   atomic.Uint64
}

// Option changes a Client New makes, beyond Options.
type Option func(*Client) error

// WithHTTPClient makes the Client send its requests with hc (its
// Transport, e.g. one that adds tracing, its Jar, its CheckRedirect),
// still bounded by Options.Timeout per Evaluate. A hc without a Transport
// gets the Client's own, which dials the sidecar's socket or port; a
// Transport of hc's own replaces that, so with a unix: URL it must dial
// the socket itself.
func WithHTTPClient(hc *http.Client) Option {
	return func(c *Client) error {
		if hc == nil {
			return errors.New("toolgate: WithHTTPClient(nil): give an *http.Client, or leave the option out")
		}
		own := *hc
		if own.Transport == nil {
			own.Transport = c.http.Transport
		}
		c.http = &own
		return nil
	}
}

// New finds the sidecar (Options.URL, TOOLGATE_URL, the socket, the
// loopback port) and returns a client for it. It fails only on a URL it
// cannot read or an option it cannot apply; it does not connect.
func New(opts Options, with ...Option) (*Client, error) {
	ep, err := discover(opts.URL)
	if err != nil {
		return nil, err
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("toolgate: Options.Timeout %v is negative", opts.Timeout)
	}
	if opts.Timeout == 0 {
		opts.Timeout = DefaultTimeout
	}
	// One transport keeps connections alive across calls: a new TCP or
	// Unix connection per decision would cost more than the decision.
	tr := &http.Transport{
		Proxy:               nil, // the sidecar is local; never route it through HTTP_PROXY
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 64,
		// Below the sidecar's 60 s idle timeout, so the client closes an
		// idle connection before the sidecar does and never sends on one
		// being closed.
		IdleConnTimeout:    50 * time.Second,
		DisableCompression: true,
		ForceAttemptHTTP2:  false,
	}
	if ep.socket != "" {
		var d net.Dialer
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return d.DialContext(ctx, "unix", ep.socket)
		}
	} else {
		tr.DialContext = (&net.Dialer{KeepAlive: 30 * time.Second}).DialContext
	}
	c := &Client{
		http:     &http.Client{Transport: tr},
		evalURL:  ep.base + "/v1/evaluate",
		where:    ep.String(),
		timeout:  opts.Timeout,
		failOpen: opts.FailOpen,
	}
	for _, o := range with {
		if err := o(c); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// URL is the sidecar this client asks, as unix:///path or http://host:port.
func (c *Client) URL() string { return c.where }

// FailOpenCount is how many calls were allowed because FailOpen was set and
// the sidecar gave no decision.
func (c *Client) FailOpenCount() uint64 { return c.opened.Load() }

// Close drops the kept-alive connections.
func (c *Client) Close() { c.http.CloseIdleConnections() }

// Evaluate asks the sidecar to decide req.
//
// When the sidecar gives no decision (unreachable, past Options.Timeout, a
// non-200 status, an answer that is not a decision) the result is a deny
// with Code CodeSidecarUnavailable and Reason saying why, and the error is
// nil: that is a decision, fail closed (an allow with FailOpen). The error
// is non-nil only for what the caller must fix or chose: an empty
// ToolName, a negative Wait, a field that does not encode as JSON, or ctx
// ending before an answer (ctx.Err(); never counted as fail-open). With an
// error the result is still a deny.
//
// An ask rule's call is answered ask (Result.Asked, not Allowed, with
// Result.Approval) unless req.Wait holds it for a person's decision; the
// call is bounded by Options.Timeout plus req.Wait.
func (c *Client) Evaluate(ctx context.Context, req Request) (Result, error) {
	if req.ToolName == "" {
		return unavailable(decision.Deny, errNoToolName.Error()), errNoToolName
	}
	if err := req.checkAsk(); err != nil {
		return unavailable(decision.Deny, err.Error()), err
	}
	body, err := req.MarshalJSON()
	if err != nil {
		err = fmt.Errorf("toolgate: encoding the request: %w", err)
		return unavailable(decision.Deny, err.Error()), err
	}
	return c.evaluate(ctx, body, req.Traceparent, req.Wait)
}

// EvaluateJSON asks the sidecar to decide a request already encoded as the
// JSON object it reads (what Request.MarshalJSON writes; the MCP stdio
// guard holds its calls that way), with Evaluate's results: a request the
// sidecar refuses (400) is a deny, fail closed, like any answer that is not
// a decision. It is bounded by Options.Timeout alone: body is not read
// here, so a "wait" in it is not added to the timeout (use Evaluate with
// Request.Wait to wait for a person).
func (c *Client) EvaluateJSON(ctx context.Context, body []byte) (Result, error) {
	tp, _ := ctx.Value(traceparentKey{}).(string)
	return c.evaluate(ctx, body, tp, 0)
}

// EvaluateJSONApproval is EvaluateJSON for a call an earlier answer
// asked about: decided against the ApprovalRequest named approval, the
// sidecar holding the answer up to wait for a person's decision. It is
// bounded by Options.Timeout plus wait. body must be a JSON object.
func (c *Client) EvaluateJSONApproval(ctx context.Context, body []byte, approval string, wait time.Duration) (Result, error) {
	if wait < 0 {
		return Result{}, fmt.Errorf("toolgate: wait %v is negative", wait)
	}
	n := len(body)
	for n > 0 && body[n-1] != '}' {
		n--
	}
	if n == 0 || approval == "" {
		return Result{}, errors.New("toolgate: EvaluateJSONApproval needs a JSON object and an approval name")
	}
	out := make([]byte, 0, n+64+len(approval))
	out = append(out, body[:n-1]...)
	if len(bytes.TrimSpace(body[:n-1])) > 1 {
		out = append(out, ',')
	}
	out = append(out, `"approval":`...)
	out = decision.AppendJSONString(out, approval)
	out = append(out, `,"wait":`...)
	out = decision.AppendJSONString(out, wait.String())
	out = append(out, '}')
	tp, _ := ctx.Value(traceparentKey{}).(string)
	return c.evaluate(ctx, out, tp, wait)
}

type traceparentKey struct{}

// WithTraceparent returns ctx with a W3C traceparent that EvaluateJSON
// sends with its request, so the sidecar's decision span is a child of
// the caller's span ("" sends none).
func WithTraceparent(ctx context.Context, traceparent string) context.Context {
	return context.WithValue(ctx, traceparentKey{}, traceparent)
}

// evaluate posts body; wait is how long the sidecar may hold the answer
// for a person, on top of the client's own timeout (the sidecar moves its
// write deadline past the wait the same way).
func (c *Client) evaluate(ctx context.Context, body []byte, traceparent string, wait time.Duration) (Result, error) {
	timeout := c.timeout + wait
	callCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, why := c.post(callCtx, body, traceparent, timeout)
	if why == "" {
		return res, nil
	}
	if err := ctx.Err(); err != nil {
		return unavailable(decision.Deny, "toolgate sidecar at "+c.where+": "+why), err
	}
	if c.failOpen {
		c.opened.Add(1)
		return unavailable(decision.Allow, "toolgate sidecar at "+c.where+" gave no decision, allowed (fail open): "+why), nil
	}
	return unavailable(decision.Deny, "toolgate sidecar at "+c.where+" gave no decision, denied (fail closed): "+why), nil
}

// post sends one request; why is empty when the answer is a decision, else
// says why there is none.
func (c *Client) post(ctx context.Context, body []byte, traceparent string, timeout time.Duration) (Result, string) {
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, c.evalURL, bytes.NewReader(body))
	if err != nil {
		return Result{}, err.Error()
	}
	hr.Header.Set("Content-Type", "application/json")
	if traceparent != "" {
		hr.Header.Set("traceparent", traceparent)
	}
	resp, err := c.http.Do(hr)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() != nil {
			return Result{}, fmt.Sprintf("no answer within %v", timeout)
		}
		return Result{}, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return Result{}, "reading the answer: " + err.Error()
	}
	if resp.StatusCode != http.StatusOK {
		// A 400 names what is wrong with the request in {"error": ...}.
		var e struct {
			Error string `json:"error"`
		}
		if json.Unmarshal(data, &e) == nil && e.Error != "" {
			return Result{}, fmt.Sprintf("status %d: %s", resp.StatusCode, e.Error)
		}
		return Result{}, fmt.Sprintf("status %d", resp.StatusCode)
	}
	var res Result
	if err := json.Unmarshal(data, &res); err != nil {
		return Result{}, "the answer is not a decision: " + err.Error()
	}
	if err := checkDecision(&res); err != nil {
		return Result{}, err.Error()
	}
	return res, ""
}
