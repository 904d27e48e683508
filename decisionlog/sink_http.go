package decisionlog

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// sendTimeout bounds one POST to the decision log sink; while a send is in
// flight the queue absorbs new events, and past its size they are dropped.
const sendTimeout = 5 * time.Second

// httpSink posts batches of decision log lines as a JSON array: when the
// batch reaches its size, or when the oldest event in it has waited one
// flush interval. A failed batch is dropped and counted, not retried, so a
// dead sink costs memory bounded by the queue and nothing else.
type httpSink struct {
	*sink
	url string
	// tokenFile, when set, is read for each batch: its content (trimmed)
	// is sent as the bearer token.
	tokenFile string
	batch     int
	every     time.Duration
	format    *lineFormat
	failed    prometheus.Counter
	log       *slog.Logger
	client    http.Client
}

func (h *httpSink) run() {
	defer close(h.stopped)
	var body []byte
	n := 0
	timer := time.NewTimer(h.every)
	timer.Stop()
	add := func(ev *Event) {
		if n == 0 {
			body = append(body[:0], '[')
		} else {
			body = append(body, ',')
		}
		body = appendEvent(body, ev, h.format)
		n++
	}
	flush := func(ctx context.Context) {
		timer.Stop()
		if n == 0 {
			return
		}
		body = append(body, ']')
		if err := h.send(ctx, body); err != nil {
			h.failed.Add(float64(n))
			h.log.Warn("decision log batch dropped", "events", n, "err", err)
		}
		n = 0
	}
	for {
		select {
		case ev := <-h.queue:
			h.take(&ev)
			if n == 0 {
				timer.Reset(h.every)
			}
			add(&ev)
			if n >= h.batch {
				flush(context.Background())
			}
		case <-timer.C:
			flush(context.Background())
		case <-h.stop:
			for len(h.queue) > 0 { // this goroutine is the only reader
				ev := <-h.queue
				h.take(&ev)
				add(&ev)
				if n >= h.batch {
					flush(context.Background())
				}
			}
			flush(context.Background())
			return
		}
	}
}

func (h *httpSink) send(ctx context.Context, body []byte) error {
	ctx, cancel := context.WithTimeout(ctx, sendTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if h.tokenFile != "" {
		token, err := readToken(h.tokenFile)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := h.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("decision log sink answered %s", resp.Status)
	}
	return nil
}

// maxTokenBytes bounds what readToken reads: a ServiceAccount token is a
// few kilobytes.
const maxTokenBytes = 64 << 10

// readToken reads the bearer token file; an empty or oversized file is an
// error, so a batch is dropped (and counted) rather than sent unauthenticated.
func readToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("decision log token: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTokenBytes+1))
	if err != nil {
		return "", fmt.Errorf("decision log token %s: %w", path, err)
	}
	if len(b) > maxTokenBytes {
		return "", fmt.Errorf("decision log token %s: more than %d bytes", path, maxTokenBytes)
	}
	token := strings.TrimSpace(string(b))
	if token == "" || strings.ContainsAny(token, " \t\r\n") {
		return "", fmt.Errorf("decision log token %s: empty, or not one token", path)
	}
	return token, nil
}
