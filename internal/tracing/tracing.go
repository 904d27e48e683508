package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/toolgate/toolgate/decisionlog"
)

// Scope is the instrumentation scope of every toolgate span.
const Scope = "github.com/toolgate/toolgate"

// tracer is the tracer spans are made with: a no-op one until Setup turns
// tracing on. on is read first on every path, so tracing off costs one
// atomic load.
var (
	on     atomic.Bool
	tracer atomic.Pointer[trace.Tracer]
)

func init() {
	t := noop.NewTracerProvider().Tracer(Scope)
	tracer.Store(&t)
}

// On tells whether spans are made.
func On() bool { return on.Load() }

// Tracer is the tracer toolgate's spans are made with.
func Tracer() trace.Tracer { return *tracer.Load() }

// Setup turns tracing on when the environment asks for it (Enabled): an
// OTLP/HTTP exporter configured by the OTEL_EXPORTER_OTLP_* variables, a
// batch span processor (OTEL_BSP_*), the sampler of OTEL_TRACES_SAMPLER
// (default parentbased_always_on, so a caller's unsampled traceparent
// makes no spans), and a resource named service (unless OTEL_SERVICE_NAME
// says otherwise) with OTEL_RESOURCE_ATTRIBUTES. shutdown flushes the
// spans still queued; it is a no-op when tracing is off. A bad variable is
// an error: the command refuses to start rather than run untraced
// unawares.
func Setup(ctx context.Context, service string) (shutdown func(context.Context) error, err error) {
	enabled, err := Enabled(os.Getenv)
	if err != nil || !enabled {
		return func(context.Context) error { return nil }, err
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: the OTLP exporter: %w", err)
	}
	// WithFromEnv after the service name: OTEL_SERVICE_NAME wins, as the
	// specification asks.
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName(service)), resource.WithFromEnv(),
		resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: %s: %w", envResourceAttributes, err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	t := tp.Tracer(Scope)
	tracer.Store(&t)
	on.Store(true)
	return func(ctx context.Context) error {
		on.Store(false)
		return tp.Shutdown(ctx)
	}, nil
}

const envResourceAttributes = "OTEL_RESOURCE_ATTRIBUTES"

// FromHeader returns ctx with the caller's W3C traceparent (and
// tracestate) as the remote parent of the spans made under it, read by
// decisionlog.ParseTraceparent as the decision log reads it: a header that
// does not parse is no parent, never an error. Call it only when On.
func FromHeader(ctx context.Context, h http.Header) context.Context {
	v := h["Traceparent"]
	if len(v) != 1 {
		return ctx
	}
	traceHex, spanHex, flagsHex := decisionlog.ParseTraceparent(v[0])
	if traceHex == "" {
		return ctx
	}
	cfg := trace.SpanContextConfig{Remote: true}
	cfg.TraceID, _ = trace.TraceIDFromHex(traceHex)
	cfg.SpanID, _ = trace.SpanIDFromHex(spanHex)
	if hexByte(flagsHex)&byte(trace.FlagsSampled) != 0 {
		cfg.TraceFlags = trace.FlagsSampled
	}
	if ts := h["Tracestate"]; len(ts) > 0 {
		// An invalid tracestate is dropped, the traceparent kept, as the
		// W3C propagator does.
		cfg.TraceState, _ = trace.ParseTraceState(ts[0])
	}
	return trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(cfg))
}

// Inject sets h's traceparent (and tracestate) to ctx's span, so the peer
// the request goes to continues the trace under it; h is left as it is
// when ctx holds no valid span.
func Inject(ctx context.Context, h http.Header) {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return
	}
	flags := "00"
	if sc.IsSampled() {
		flags = "01"
	}
	h["Traceparent"] = []string{"00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + flags}
	if ts := sc.TraceState().String(); ts != "" {
		h["Tracestate"] = []string{ts}
	} else {
		delete(h, "Tracestate")
	}
}

// hexByte is the value of two lower-case hex digits (ParseTraceparent
// checked them).
func hexByte(s string) byte {
	var b byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			b = b<<4 | (c - '0')
		default:
			b = b<<4 | (c - 'a' + 10)
		}
	}
	return b
}

// shutdownWait bounds the flush of the spans still queued when a command
// ends: a collector that is down must not hold the exit longer.
const shutdownWait = 5 * time.Second

// Run runs a command's work with tracing set up from the environment for
// service (Setup), and flushes the spans still queued when it returns; a
// flush that fails is logged, not the command's error.
func Run(ctx context.Context, service string, run func(context.Context) error) error {
	shutdown, err := Setup(ctx, service)
	if err != nil {
		return err
	}
	defer Flush(ctx, shutdown)
	return run(ctx)
}

// Flush calls a Setup's shutdown, for at most shutdownWait; a flush that
// fails is logged.
func Flush(ctx context.Context, shutdown func(context.Context) error) {
	flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownWait)
	defer cancel()
	if err := shutdown(flushCtx); err != nil {
		slog.Warn("tracing: flushing the last spans failed", "err", err)
	}
}

// Traceparent is the W3C traceparent of ctx's span, "" when it holds
// none: what a request made under that span sends (Inject writes it).
func Traceparent(ctx context.Context) string {
	h := http.Header{}
	Inject(ctx, h)
	return h.Get("Traceparent")
}
