package decisionlog

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestHTTPSinkSendsTheTokenReadForEachBatch: the token file is read again
// for every batch, so a token the kubelet rotated in place is the one sent.
func TestHTTPSinkSendsTheTokenReadForEachBatch(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
	}))
	defer srv.Close()
	path := filepath.Join(t.TempDir(), "token")
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "d"}, []string{"sink", "reason"})
	send := func(token string) {
		if err := os.WriteFile(path, []byte(token), 0o600); err != nil {
			t.Fatal(err)
		}
		d := New(Config{URL: srv.URL, TokenFile: path, Batch: 1, FlushInterval: time.Minute, Queue: 10, QueueBytes: 1 << 20},
			dropped, slog.New(slog.NewTextHandler(io.Discard, nil)))
		d.Record(&Event{At: time.Now(), ToolName: "t", Decision: "allow", Effect: "allow"})
		if err := d.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	send("first\n")
	send("second")
	mu.Lock()
	defer mu.Unlock()
	if strings.Join(seen, ",") != "Bearer first,Bearer second" {
		t.Errorf("Authorization headers %q", seen)
	}
}

// TestHTTPSinkDropsBatchesWithoutAUsableToken: a token file that is
// missing, empty, more than one token or too large drops the batch (counted)
// instead of sending it unauthenticated.
func TestHTTPSinkDropsBatchesWithoutAUsableToken(t *testing.T) {
	t.Parallel()
	calls := 0
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { calls++ }))
	defer srv.Close()
	dir := t.TempDir()
	for name, content := range map[string]string{"empty": " \n", "two": "a b", "huge": strings.Repeat("x", maxTokenBytes+1)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ file, want string }{
		{"missing", "no such file"},
		{"empty", "empty, or not one token"},
		{"two", "empty, or not one token"},
		{"huge", "more than 65536 bytes"},
	} {
		if _, err := readToken(filepath.Join(dir, c.file)); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error saying %q", c.file, err, c.want)
		}
		dropped := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "d"}, []string{"sink", "reason"})
		d := New(Config{URL: srv.URL, TokenFile: filepath.Join(dir, c.file), Batch: 1, FlushInterval: time.Minute, Queue: 10, QueueBytes: 1 << 20},
			dropped, slog.New(slog.NewTextHandler(io.Discard, nil)))
		d.Record(&Event{At: time.Now(), ToolName: "t", Decision: "allow", Effect: "allow"})
		if err := d.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := testutil.ToFloat64(dropped.WithLabelValues("http", "send_failed")); got != 1 {
			t.Errorf("%s: %v dropped, want 1", c.file, got)
		}
	}
	if calls != 0 {
		t.Errorf("%d batches were sent without a usable token", calls)
	}
}
