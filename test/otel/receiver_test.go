package otel

import (
	"context"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/collector/component/componenttest"
	"go.opentelemetry.io/collector/config/configgrpc"
	"go.opentelemetry.io/collector/config/configoptional"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/pdata/pcommon"
	"go.opentelemetry.io/collector/pdata/ptrace"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/receiver/receivertest"
)

// span is one span the receiver was sent, with its resource's service.
type span struct {
	service       string
	resource      map[string]any
	traceID       string
	spanID        string
	parentSpanID  string
	name          string
	kind          ptrace.SpanKind
	attrs         map[string]any
	start, end    time.Time
	statusCode    ptrace.StatusCode
	statusMessage string
}

// receiver is the OpenTelemetry Collector's own OTLP receiver
// (go.opentelemetry.io/collector/receiver/otlpreceiver, HTTP only) on
// loopback, with a consumer that keeps every span it is sent.
type receiver struct {
	endpoint string // http://127.0.0.1:PORT, for OTEL_EXPORTER_OTLP_ENDPOINT
	mu       sync.Mutex
	spans    []span
	changed  chan struct{}
}

func startReceiver(t *testing.T) *receiver {
	t.Helper()
	rec := &receiver{changed: make(chan struct{}, 1)}
	factory := otlpreceiver.NewFactory()
	cfg := factory.CreateDefaultConfig().(*otlpreceiver.Config)
	cfg.Protocols.GRPC = configoptional.None[configgrpc.ServerConfig]()
	addr := freeAddr(t)
	cfg.Protocols.HTTP.GetOrInsertDefault().ServerConfig.NetAddr.Endpoint = addr
	rec.endpoint = "http://" + addr
	next, err := consumer.NewTraces(rec.consume)
	if err != nil {
		t.Fatal(err)
	}
	r, err := factory.CreateTraces(context.Background(), receivertest.NewNopSettings(factory.Type()), cfg, next)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background(), componenttest.NewNopHost()); err != nil {
		t.Fatalf("starting the OTLP receiver on %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = r.Shutdown(context.Background()) })
	return rec
}

// freeAddr is a loopback address nothing listens on now: the receiver's
// configuration takes an address, not a listener.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return "127.0.0.1:" + strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

func (rec *receiver) consume(_ context.Context, td ptrace.Traces) error {
	var got []span
	for i := 0; i < td.ResourceSpans().Len(); i++ {
		rs := td.ResourceSpans().At(i)
		res := rs.Resource().Attributes().AsRaw()
		service, _ := res["service.name"].(string)
		for j := 0; j < rs.ScopeSpans().Len(); j++ {
			ss := rs.ScopeSpans().At(j).Spans()
			for k := 0; k < ss.Len(); k++ {
				s := ss.At(k)
				got = append(got, span{
					service: service, resource: res,
					traceID: s.TraceID().String(), spanID: s.SpanID().String(), parentSpanID: parentOf(s),
					name: s.Name(), kind: s.Kind(), attrs: s.Attributes().AsRaw(),
					start: s.StartTimestamp().AsTime(), end: s.EndTimestamp().AsTime(),
					statusCode: s.Status().Code(), statusMessage: s.Status().Message(),
				})
			}
		}
	}
	rec.mu.Lock()
	rec.spans = append(rec.spans, got...)
	rec.mu.Unlock()
	select {
	case rec.changed <- struct{}{}:
	default:
	}
	return nil
}

func parentOf(s ptrace.Span) string {
	if p := s.ParentSpanID(); p != (pcommon.SpanID{}) {
		return p.String()
	}
	return ""
}

// await waits until the spans of traceID satisfy done, and returns them.
func (rec *receiver) await(t *testing.T, traceID string, what string, done func([]span) bool) []span {
	t.Helper()
	return rec.awaitWhere(t, "trace "+traceID, func(s span) bool { return s.traceID == traceID }, what, done)
}

// awaitWhere waits until the spans in satisfies satisfy done, and returns
// them.
func (rec *receiver) awaitWhere(t *testing.T, where string, in func(span) bool, what string, done func([]span) bool) []span {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		var got []span
		rec.mu.Lock()
		for _, s := range rec.spans {
			if in(s) {
				got = append(got, s)
			}
		}
		rec.mu.Unlock()
		in := got
		if done(in) {
			return in
		}
		select {
		case <-rec.changed:
		case <-deadline:
			t.Fatalf("%s: no %s within 30s; the receiver has %+v", where, what, in)
		}
	}
}

// named are the spans called name.
func named(spans []span, name string) []span {
	var out []span
	for _, s := range spans {
		if s.name == name {
			out = append(out, s)
		}
	}
	return out
}
