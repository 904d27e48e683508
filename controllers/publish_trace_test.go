package controllers_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/toolgate/toolgate/controllers"
	"github.com/toolgate/toolgate/internal/testenv"
	"github.com/toolgate/toolgate/internal/tracing"
)

// TestPublishSpan: with OTEL_EXPORTER_OTLP_ENDPOINT set, the manager's
// publish of a namespace's bundle is a toolgate.bundle.publish span, sent
// by the SDK's OTLP/HTTP exporter as OTLP protobuf, with the namespace, the
// revision published and the result. The receiver is a loopback server
// that decodes the OTLP request with the protocol's own definitions
// (go.opentelemetry.io/proto/otlp); test/otel checks the sidecar's spans
// with the OpenTelemetry Collector's receiver, which the main module does
// not depend on.
func TestPublishSpan(t *testing.T) {
	var mu sync.Mutex
	var spans []*tracepb.Span
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req coltracepb.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "not an OTLP trace export", http.StatusBadRequest)
			return
		}
		mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				spans = append(spans, ss.Spans...)
			}
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write([]byte{})
	}))
	defer srv.Close()
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", srv.URL)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	shutdown, err := tracing.Setup(context.Background(), "toolgate-manager")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = shutdown(context.Background()) }()

	ns := testenv.Namespace(t, k8s, "tg-")
	startManager(t, controllers.Options{}, ns)
	create(t, policy(ns, "a", 2))
	testenv.Eventually(t, "a published span for "+ns, func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		for _, s := range spans {
			a := attrs(s)
			if s.Name == controllers.SpanPublish && a[controllers.AttrNamespace] == ns && a[controllers.AttrPublishResult] == "published" {
				return a[controllers.AttrBundleRevision] == expectedRevision(t, ns), "revision " + a[controllers.AttrBundleRevision]
			}
		}
		return false, "no such span yet"
	})
}

func attrs(s *tracepb.Span) map[string]string {
	out := map[string]string{}
	for _, kv := range s.Attributes {
		out[kv.Key] = kv.Value.GetStringValue()
	}
	return out
}
