package mcp

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/decide"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/tracing"
	"github.com/toolgate/toolgate/mcp/jsonrpc"
	"github.com/toolgate/toolgate/mcp/pin"
)

// The stdio guard (`toolgate mcp stdio`): an MCP server the agent starts
// itself (stdio, as in Claude Code's, Cursor's or an SDK's server list) is
// started by toolgate instead, which relays every message both ways and
// decides each tools/call first. It reads messages with the proxy's own
// reader, builds the proxy's request and denies with the proxy's answer,
// so a call is read, decided and refused as over HTTP. Unlike the HTTP
// proxy it does not hold the server's credentials, and filters tools/list
// only by pinned definitions (--pins, pin_stdio.go), not by rules:
// whoever edits the agent's server list can start the server without it,
// so it guards an agent that is configured, as the hooks do.

// StdioOptions configure the stdio guard.
type StdioOptions struct {
	// Server is the request's server field: the name policies match.
	Server string
	// AgentID is sent as the request's agent_id, unless a call's _meta
	// names one (the sidecar's own binding wins over both).
	AgentID string
	// Command is the server to start, and its arguments.
	Command []string
	// Decide decides the calls.
	Decide Decider
	// Wait holds a call an ask rule decided until a person decides it
	// (holdAsked); nil: an ask is answered as a deny, not allowed.
	Wait Waiter
	// Judge judges the results of the calls let through (result_stdio.go);
	// nil: results go to the agent unjudged.
	Judge ResultJudge
	// JudgesResults tells whether the rules served have result rules, so
	// that without them nothing is held or parsed; nil: always judge.
	JudgesResults func() bool
	// MaxResultBytes is --max-result-bytes (DefaultMaxResultBytes when 0).
	MaxResultBytes int
	// Pins are the server's pinned tool definitions (pin_stdio.go); nil:
	// none.
	Pins *pin.Set
}

// Decider decides one request, given as the JSON object /v1/evaluate
// reads: the result and the decision object the agent is shown under
// _meta when it is not an allow. It never fails: a decision it could not
// get is a deny. (The CLI asks the sidecar with the Go client, which this
// package does not import: the client's tests start it.)
type Decider func(ctx context.Context, request []byte) (res engine.Result, decision []byte)

// MaxStdioLine bounds one message from the agent, as decide.MaxRequestBytes bounds
// a POST: a longer line is refused and read past, never forwarded.
const MaxStdioLine = decide.MaxRequestBytes

// RunStdio starts the server and relays until the agent closes its
// input and the server exits, or the server exits. It returns the
// server's exit status.
func RunStdio(ctx context.Context, o StdioOptions, in io.Reader, out, errOut io.Writer) (int, error) {
	if o.Server == "" || len(o.Command) == 0 || o.Decide == nil {
		return 2, errors.New("toolgate mcp stdio: a server name, the server's command and a decider are required")
	}
	cmd := exec.Command(o.Command[0], o.Command[1:]...)
	cmd.Stderr = errOut
	toServer, err := cmd.StdinPipe()
	if err != nil {
		return 2, err
	}
	fromServer, err := cmd.StdoutPipe()
	if err != nil {
		return 2, err
	}
	if err := cmd.Start(); err != nil {
		return 2, fmt.Errorf("toolgate mcp stdio: starting the server: %w", err)
	}
	// Signals the agent sends toolgate are the server's too.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer func() { signal.Stop(sigs); close(sigs) }()
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()

	w := &stdioWriter{w: out}
	schemas := newStdioSchemas()
	schemas.stdioPins(o.Pins, o.Server, errOut)
	relayed := make(chan struct{})
	g := &stdioGuard{opts: o, session: newStdioSession(), out: w, schemas: schemas}
	go func() {
		defer close(relayed)
		g.relay(ctx, fromServer, schemas.relay)
	}()
	go func() {
		g.guard(ctx, in, toServer)
		// The agent is done (or gone): the server's input ends, as if
		// the agent had started it itself.
		_ = toServer.Close()
	}()
	<-relayed
	err = cmd.Wait()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0, nil
	case errors.As(err, &exit):
		if ws, ok := exit.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal()), nil // as a shell says a server killed by a signal
		}
		return exit.ExitCode(), nil
	}
	return 1, err
}

// stdioWriter writes whole lines to the agent, from both the server's
// relay and the guard's own answers, never interleaved.
type stdioWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *stdioWriter) line(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(b) == 0 || b[len(b)-1] != '\n' {
		b = append(b[:len(b):len(b)], '\n')
	}
	_, err := s.w.Write(b)
	return err
}

// newStdioSession is the session_id of calls that name none: one per
// server process, as an MCP session over stdio is.
func newStdioSession() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return "stdio-" + hex.EncodeToString(b[:])
}

// stdioGuard decides what the agent sends before the server sees it.
type stdioGuard struct {
	opts    StdioOptions
	session string
	out     *stdioWriter
	// modern: the agent asked for 2026-07-28 or later at initialize, whose
	// results say they are complete.
	modern bool
	// schemas are the server's tools' schemas; toServer is where the
	// guard's own tools/list goes.
	schemas  *stdioSchemas
	toServer io.Writer
	// held are the calls waiting for approval, by request id.
	held heldCalls
	// results are the calls let through whose answers are judged.
	results stdioResults
}

func (g *stdioGuard) guard(ctx context.Context, in io.Reader, toServer io.Writer) {
	toServer = &lockedWriter{w: toServer}
	g.toServer = toServer
	br := bufio.NewReaderSize(in, 64<<10)
	for {
		line, tooLong, err := readLine(br, MaxStdioLine)
		if tooLong {
			_ = g.out.line(appendRPCError(nil, nil, RPCInvalidRequest,
				fmt.Sprintf("toolgate: a message of more than %d bytes; not forwarded", MaxStdioLine)))
		} else if len(line) > 0 {
			if fwd := g.check(ctx, line); fwd != nil {
				if _, werr := toServer.Write(fwd); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// readLine reads one line with its newline, at most limit bytes; past it
// the rest of the line is read and dropped (tooLong).
func readLine(br *bufio.Reader, limit int) (line []byte, tooLong bool, err error) {
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			if len(line)+len(chunk) > limit {
				tooLong, line = true, nil
			} else {
				line = append(line, chunk...)
			}
		}
		if err != bufio.ErrBufferFull {
			return line, tooLong, err
		}
	}
}

// check returns what to forward for one line from the agent: the line
// itself, or nil when toolgate answered it (a denied or unreadable call).
func (g *stdioGuard) check(ctx context.Context, line []byte) []byte {
	if err := checkStdioFraming(line); err != nil {
		_ = g.out.line(appendRPCError(nil, nil, RPCInvalidRequest, err.Error()))
		return nil
	}
	if len(bytes.TrimSpace(line)) == 0 {
		return line
	}
	msgs, batch, err := jsonrpc.Parse(line)
	if err != nil {
		_ = g.out.line(appendRPCError(nil, nil, RPCInvalidRequest, "toolgate: the message is not JSON-RPC toolgate can read unambiguously: "+err.Error()+"; not forwarded"))
		return nil
	}
	if batch {
		for _, m := range msgs {
			if m.Method == jsonrpc.MethodToolsList {
				g.schemas.agentLists(m.ID)
			}
			if decided(m.Method) || subscribesToResources(&m) {
				_ = g.out.line(appendRPCError(nil, nil, RPCInvalidRequest, "toolgate: a batch holding "+m.Method+" (MCP over stdio sends messages one by one); not forwarded"))
				return nil
			}
		}
		return line
	}
	m := &msgs[0]
	switch {
	case m.Method == "initialize":
		var p struct {
			ProtocolVersion string `json:"protocolVersion"`
		}
		_ = json.Unmarshal(m.Params, &p)
		g.modern = p.ProtocolVersion >= "2026-07-28"
	case m.Method == jsonrpc.MethodToolsList:
		g.schemas.agentLists(m.ID)
	case m.Method == MethodCancelled:
		g.cancelHeld(m)
	case decided(m.Method):
		var span trace.Span
		if tracing.On() {
			ctx, span = startStdioCall(ctx, g.opts.Server, m)
			defer span.End()
		}
		answer, allowed := g.decideCall(ctx, m, line)
		if span != nil {
			span.SetAttributes(attribute.String(AttrOutcome, outcomeOf(allowed)))
		}
		if !allowed {
			if answer != nil {
				_ = g.out.line(answer)
			}
			return nil
		}
	case m.Method == jsonrpc.MethodSubscriptionsListen:
		subs, refusal := listenSubjects(m.Params)
		if refusal != "" {
			if answer := refuseCall(m.ID, refusal); answer != nil {
				_ = g.out.line(answer)
			}
			return nil
		}
		for _, sub := range subs {
			if answer, allowed := g.decideSubject(ctx, m, sub); !allowed {
				if answer != nil {
					_ = g.out.line(answer)
				}
				return nil
			}
		}
	}
	return line
}

// decideCall asks the sidecar about one tools/call, or another method
// decided (methods.go). Not allowed, answer is what the agent gets instead
// (nil for a notification, which gets none): a deny as the HTTP proxy's,
// whose text the model reads and which holds the decision.
func (g *stdioGuard) decideCall(ctx context.Context, m *jsonrpc.Message, line []byte) (answer json.RawMessage, allowed bool) {
	sub, refusal := subjectOf(m)
	if refusal != "" {
		return refuseCall(m.ID, refusal), false
	}
	if m.Method == jsonrpc.MethodToolsCall {
		if answer, denied := g.denyDrifted(ctx, m, sub.tool); denied {
			return answer, false
		}
	}
	if m.Method == jsonrpc.MethodToolsCall && needsSchema(sub.input) {
		listing := g.schemas.ensure(ctx, g.toServer, sub.tool, m.Call.RawMeta)
		var args any
		_ = json.Unmarshal(sub.input, &args) // valid JSON: the reader checked it
		if err := g.schemas.schemas.checkArgumentKeys(sub.tool, args); err != nil {
			msg := "toolgate: " + err.Error()
			if listing != nil {
				msg += " (listing the server's tools: " + listing.Error() + ")"
			}
			return refuseCall(m.ID, msg+"; not forwarded"), false
		}
	}
	return g.decideSubjectHolding(ctx, m, sub, line)
}

// decideSubject asks the sidecar about what m asks, sub, as decideCall
// says.
func (g *stdioGuard) decideSubject(ctx context.Context, m *jsonrpc.Message, sub subject) (answer json.RawMessage, allowed bool) {
	return g.decideSubjectHolding(ctx, m, sub, nil)
}

// decideSubjectHolding is decideSubject, holding an asked tools/call
// (line, its message) for a person's decision when the guard can wait:
// then nothing is answered or forwarded now (holdAsked does it later).
func (g *stdioGuard) decideSubjectHolding(ctx context.Context, m *jsonrpc.Message, sub subject, line []byte) (answer json.RawMessage, allowed bool) {
	session, agent := g.session, sub.meta.AgentID
	if sub.meta.SessionID != nil {
		session = *sub.meta.SessionID
	}
	if agent == nil && g.opts.AgentID != "" {
		agent = &g.opts.AgentID
	}
	doc := mcpRequestDoc(sub.tool, g.opts.Server, sub.action, sub.input, session, agent)
	res, decision := g.opts.Decide(ctx, doc)
	if res.Decision == engine.Allow {
		if m.Method == jsonrpc.MethodToolsCall && len(m.ID) > 0 && g.judging() {
			g.expect(m.ID, doc)
		}
		return nil, true
	}
	if line != nil && g.holdAsked(ctx, m, line, doc, &res) {
		return nil, false
	}
	if len(decision) == 0 {
		decision, _ = res.AppendJSON(nil) // the engine's fields at least
	}
	return denyAnswer(m.ID, m.Method, &res, decision, g.modern), false
}
