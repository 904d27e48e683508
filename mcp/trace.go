package mcp

import (
	"context"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolgate/toolgate/internal/tracing"
	"github.com/toolgate/toolgate/mcp/jsonrpc"
)

// The spans of a proxied MCP call: the call (a POST the proxy reads and
// decides), its decisions under it (decide.SpanDecision) and the round
// trip upstream under it when it is forwarded.
const (
	SpanCall     = "toolgate.mcp.call"
	SpanUpstream = "toolgate.mcp.upstream"
	// AttrMethod and AttrTool are OpenTelemetry's MCP semantic
	// conventions' names.
	AttrMethod   = "mcp.method.name"
	AttrTool     = "gen_ai.tool.name"
	AttrUpstream = "toolgate.mcp.upstream"
	AttrOutcome  = "toolgate.mcp.outcome"
)

// startCall starts the span of a POST proxied to rt, under the agent's
// traceparent, and returns r carrying it, so the decisions made for it
// are its children. Called only when tracing is on.
func startCall(r *http.Request, rt *mcpRoute) (*http.Request, trace.Span) {
	ctx := tracing.FromHeader(r.Context(), r.Header)
	ctx, span := tracing.Tracer().Start(ctx, SpanCall, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String(AttrUpstream, rt.up.name)))
	return r.WithContext(ctx), span
}

// describeCall names the call's span after what the POST asks: a single
// message's method (and tool), or "batch".
func describeCall(span trace.Span, msgs []jsonrpc.Message, batch bool) {
	if batch {
		span.SetAttributes(attribute.String(AttrMethod, "batch"))
		return
	}
	m := &msgs[0]
	if m.Method == "" {
		return // a response the client sends the server
	}
	span.SetAttributes(attribute.String(AttrMethod, m.Method))
	if m.Call != nil && m.Call.Name != nil {
		span.SetAttributes(attribute.String(AttrTool, *m.Call.Name))
	}
}

// startUpstream starts the span of the round trip to rt's upstream under
// the call's, and has the forwarded request's traceparent name it, so the
// upstream's own spans continue the agent's trace beneath it. Called only
// when tracing is on.
func startUpstream(r *http.Request, rt *mcpRoute) (*http.Request, trace.Span) {
	ctx, span := tracing.Tracer().Start(r.Context(), SpanUpstream, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String(AttrUpstream, rt.up.name), attribute.String("server.address", rt.up.url.Host)))
	r = r.WithContext(ctx)
	tracing.Inject(ctx, r.Header)
	return r, span
}

// startStdioCall starts the span of a message the stdio guard decides for
// server: the decision is made under it (by the sidecar, sent its
// traceparent, or in process). Called only when tracing is on.
func startStdioCall(ctx context.Context, server string, m *jsonrpc.Message) (context.Context, trace.Span) {
	ctx, span := tracing.Tracer().Start(ctx, SpanCall, trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String(AttrUpstream, server), attribute.String(AttrMethod, m.Method)))
	if m.Call != nil && m.Call.Name != nil {
		span.SetAttributes(attribute.String(AttrTool, *m.Call.Name))
	}
	return ctx, span
}

// outcomeOf is a decided message's outcome attribute.
func outcomeOf(allowed bool) string {
	if allowed {
		return mcpForwarded
	}
	return mcpDenied
}
