package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"

	"github.com/toolgate/toolgate/mcp/jsonrpc"
	"github.com/toolgate/toolgate/mcp/pin"
)

// stdioPins sets up the stdio guard's pins (StdioOptions.Pins) for its
// server, named --server: drifts are said on errOut, as the guard's local
// denies are, since no sidecar counts them.
func (s *stdioSchemas) stdioPins(set *pin.Set, server string, errOut io.Writer) {
	s.pins.upstream = server
	s.pins.report = &driftReport{log: slog.New(slog.NewTextHandler(errOut, nil))}
	if set != nil {
		s.pins.set.Store(set)
	}
}

// denyDrifted denies a tools/call to a tool whose definition drifted from
// its pin (the server's tools listed first when the guard has not seen
// it), as the HTTP proxy does; false lets the call be decided.
func (g *stdioGuard) denyDrifted(ctx context.Context, m *jsonrpc.Message, tool string) (json.RawMessage, bool) {
	ps := &g.schemas.pins
	if !ps.active() {
		return nil, false
	}
	if !ps.known(tool) {
		_ = g.schemas.ensure(ctx, g.toServer, tool, m.Call.RawMeta) // failing, the tool stays unknown: denied below
	}
	res, denied := ps.denyCall(tool)
	if !denied {
		return nil, false
	}
	ps.report.log.Warn("tools/call denied", "server", ps.upstream, "tool", tool, "code", string(res.Code), "reason", res.Reason)
	decision, _ := res.AppendJSON(nil)
	return denyAnswer(m.ID, m.Method, &res, decision, g.modern), true
}

// relay is what the agent gets of one line from the server: fromServer's
// answer, and with pins, any tools list in it without the tools they
// hide. Every list is filtered, not only the answers to the tools/list
// ids the guard remembers (a bounded number): an agent sending many lists
// at once must not see a changed tool the guard did not look at.
func (s *stdioSchemas) relay(line []byte) []byte {
	if !s.fromServer(line) {
		return nil
	}
	if s.pins.active() && bytes.Contains(line, []byte(`"tools"`)) {
		return filterPinned(line, &s.pins)
	}
	return line
}
