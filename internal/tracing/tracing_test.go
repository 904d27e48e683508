package tracing

import (
	"context"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/trace"
)

// TestFromHeaderReadsTraceparentAsTheDecisionLog: the parent of a span is
// the caller's traceparent as decisionlog.ParseTraceparent reads it,
// sampled flag and tracestate kept; a header the decision log ignores
// gives no parent; Inject writes it back unchanged.
func TestFromHeaderReadsTraceparentAsTheDecisionLog(t *testing.T) {
	t.Parallel()
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	h := http.Header{"Traceparent": {tp}, "Tracestate": {"vendor=1"}}
	sc := trace.SpanContextFromContext(FromHeader(context.Background(), h))
	if !sc.IsValid() || !sc.IsRemote() || !sc.IsSampled() || sc.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" ||
		sc.SpanID().String() != "00f067aa0ba902b7" || sc.TraceState().String() != "vendor=1" {
		t.Fatalf("span context %+v from %q", sc, tp)
	}
	out := http.Header{}
	Inject(trace.ContextWithSpanContext(context.Background(), sc), out)
	if out.Get("Traceparent") != tp || out.Get("Tracestate") != "vendor=1" {
		t.Errorf("injected %v, want %s and vendor=1", out, tp)
	}
	unsampled := trace.SpanContextFromContext(FromHeader(context.Background(), http.Header{"Traceparent": {tp[:53] + "00"}}))
	if !unsampled.IsValid() || unsampled.IsSampled() {
		t.Errorf("flags 00: %+v, want valid and not sampled", unsampled)
	}
	for _, bad := range []http.Header{
		{},
		{"Traceparent": {"00-" + "4BF92F3577B34DA6A3CE929D0E0E4736" + "-00f067aa0ba902b7-01"}},
		{"Traceparent": {tp, tp}},
		{"Traceparent": {"ff" + tp[2:]}},
	} {
		if sc := trace.SpanContextFromContext(FromHeader(context.Background(), bad)); sc.IsValid() {
			t.Errorf("%v: parent %+v, want none", bad, sc)
		}
	}
}
