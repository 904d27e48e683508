package sidecar

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/scenario"
)

// benchWriter is a ResponseWriter that keeps nothing, so the benchmark
// counts the handler's allocations and not a recorder's.
type benchWriter struct {
	h      http.Header
	status int
	n      int
}

func (w *benchWriter) Header() http.Header         { return w.h }
func (w *benchWriter) WriteHeader(status int)      { w.status = status }
func (w *benchWriter) Write(p []byte) (int, error) { w.n += len(p); return len(p), nil }

// rewindBody is a request body that can be replayed without allocating.
type rewindBody struct{ bytes.Reader }

func (*rewindBody) Close() error { return nil }

// BenchmarkHandler drives the evaluate handler directly with the FINDINGS
// reference bundle (1000 rules), decision logging to a discarding writer.
func BenchmarkHandler(b *testing.B) {
	cases := []struct {
		name, body, want string
		log              bool
	}{
		{"rules=1000/deny", `{"tool_name":"tool_500","agent_id":"agent-1","session_id":"s-1","input":{"command":"run danger_500 now"},"kwargs":{"amount":5000}}`, `"decision":"deny"`, true},
		{"rules=1000/allow", `{"tool_name":"Bash","agent_id":"agent-1","session_id":"s-1","input":{"command":"ls -la /var/log"}}`, `"decision":"allow"`, true},
		{"rules=1000/deny/no-log", `{"tool_name":"tool_500","agent_id":"agent-1","session_id":"s-1","input":{"command":"run danger_500 now"},"kwargs":{"amount":5000}}`, `"decision":"deny"`, false},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			o := testOptions()
			if tc.log {
				o.DecisionLog, o.DecisionLogWriter = DecisionLogStdout, io.Discard
			}
			s, err := New(o)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = s.Close(b.Context()) }()
			doc, _ := encode(b, scenario.Reference(1000))
			if err := s.LoadDocument(doc, false); err != nil {
				b.Fatal(err)
			}
			rec := httptest.NewRecorder()
			s.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/v1/evaluate", bytes.NewBufferString(tc.body)))
			if rec.Code != http.StatusOK || !bytes.Contains(rec.Body.Bytes(), []byte(tc.want)) {
				b.Fatalf("%d %s, want %s", rec.Code, rec.Body, tc.want)
			}

			body := &rewindBody{}
			req := httptest.NewRequest(http.MethodPost, "/v1/evaluate", nil)
			req.Body = body
			req.ContentLength = int64(len(tc.body))
			w := &benchWriter{h: http.Header{}}
			payload := []byte(tc.body)
			b.ReportAllocs()
			b.SetBytes(int64(len(payload)))
			for b.Loop() {
				body.Reset(payload)
				s.ServeHTTP(w, req)
			}
			if w.status != 0 && w.status != http.StatusOK {
				b.Fatalf("status %d", w.status)
			}
		})
	}
	// The reference point: decoding alone, which the handler cannot avoid.
	// Its allocations are most of the handler's.
	b.Run("reference/engine.DecodeRequest", func(b *testing.B) {
		payload := []byte(cases[0].body)
		b.ReportAllocs()
		for b.Loop() {
			if _, err := engine.DecodeRequest(payload); err != nil {
				b.Fatal(err)
			}
		}
	})
}
