package reports

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// Bounds of the endpoint.
const (
	// DefaultMaxBodyBytes bounds one batch: a decision log line is about
	// 500 bytes, so a full default batch of 100 is some 50 KiB.
	DefaultMaxBodyBytes = 4 << 20
	// DefaultMaxDecisionsPerSecond bounds what one namespace reports in a
	// second; past it a batch is refused with 429, and the sidecar drops
	// it (its sink never retries).
	DefaultMaxDecisionsPerSecond = 5_000
	// maxInFlight bounds the batches read, authenticated and counted at
	// once; more are refused with 429 before they cost a TokenReview.
	maxInFlight = 32
	// maxRateNamespaces bounds the per-namespace rate table; it is reset
	// when full, which only forgets the current second's counts.
	maxRateNamespaces = 10_000
)

// ErrUnauthenticated is an Authenticator's answer to a token it does not
// accept (401); any other error is its own failure (503).
var ErrUnauthenticated = errors.New("unauthenticated")

// Authenticator tells which namespace a bearer token may report for.
type Authenticator interface {
	Namespace(r *http.Request, token string) (string, error)
}

// Handler receives the sidecars' decision log batches (the HTTP sink's
// JSON arrays), authenticates each by its bearer token and counts its
// decisions into the aggregator for the token's namespace only.
type Handler struct {
	Auth        Authenticator
	Agg         *Aggregator
	MaxBody     int64 // DefaultMaxBodyBytes when 0
	MaxPerSec   int   // DefaultMaxDecisionsPerSecond when 0
	Now         func() time.Time
	Metrics     *Metrics
	inFlight    chan struct{}
	once        sync.Once
	mu          sync.Mutex
	rateSecond  int64
	rateCounted map[string]int
}

// Metrics count the endpoint's batches and the decisions it did not keep.
type Metrics struct {
	Batches   *prometheus.CounterVec // by code
	Dropped   *prometheus.CounterVec // by reason
	Decisions prometheus.Counter
}

// NewMetrics are the endpoint's counters, not registered.
func NewMetrics() *Metrics {
	m := &Metrics{
		Batches: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolgate_reports_batches_total",
			Help: "Decision log batches the reports endpoint answered, by HTTP status code."}, []string{"code"}),
		Dropped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "toolgate_reports_decisions_dropped_total",
			Help: "Decisions the reports endpoint received and did not count, by reason (other_namespace: the line names a namespace its sender's token does not belong to)."}, []string{"reason"}),
		Decisions: prometheus.NewCounter(prometheus.CounterOpts{Name: "toolgate_reports_decisions_total",
			Help: "Decisions the reports endpoint counted into reports."}),
	}
	for _, c := range []string{"200", "400", "401", "405", "413", "429", "503"} {
		m.Batches.WithLabelValues(c)
	}
	m.Dropped.WithLabelValues("other_namespace")
	return m
}

// Collectors are the metrics to register.
func (m *Metrics) Collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Batches, m.Dropped, m.Decisions}
}

type answer struct {
	Counted int    `json:"counted"`
	Dropped int    `json:"dropped,omitempty"`
	Error   string `json:"error,omitempty"`
}

func (h *Handler) reply(w http.ResponseWriter, code int, a answer) {
	if h.Metrics != nil {
		h.Metrics.Batches.WithLabelValues(fmt.Sprint(code)).Inc()
	}
	w.Header().Set("Content-Type", "application/json")
	if code == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(a)
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.once.Do(func() { h.inFlight = make(chan struct{}, maxInFlight) })
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		h.reply(w, http.StatusMethodNotAllowed, answer{Error: "POST a JSON array of decision log lines to " + v1alpha1.ReportsPath})
		return
	}
	select {
	case h.inFlight <- struct{}{}:
		defer func() { <-h.inFlight }()
	default:
		h.reply(w, http.StatusTooManyRequests, answer{Error: fmt.Sprintf("more than %d batches at once: try again", maxInFlight)})
		return
	}
	token, ok := bearer(r)
	if !ok {
		h.reply(w, http.StatusUnauthorized, answer{Error: "no bearer token: send a ServiceAccount token for the audience " + v1alpha1.ReportsAudience})
		return
	}
	maxBody := h.MaxBody
	if maxBody <= 0 {
		maxBody = DefaultMaxBodyBytes
	}
	if r.ContentLength > maxBody {
		h.reply(w, http.StatusRequestEntityTooLarge, answer{Error: fmt.Sprintf("the batch is %d bytes, more than %d", r.ContentLength, maxBody)})
		return
	}
	ns, err := h.Auth.Namespace(r, token)
	switch {
	case errors.Is(err, ErrUnauthenticated):
		h.reply(w, http.StatusUnauthorized, answer{Error: err.Error()})
		return
	case err != nil:
		h.reply(w, http.StatusServiceUnavailable, answer{Error: "authenticating the token: " + err.Error()})
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			h.reply(w, http.StatusRequestEntityTooLarge, answer{Error: fmt.Sprintf("the batch is more than %d bytes", maxBody)})
			return
		}
		h.reply(w, http.StatusBadRequest, answer{Error: "reading the batch: " + err.Error()})
		return
	}
	records, err := ParseBatch(body)
	if err != nil {
		h.reply(w, http.StatusBadRequest, answer{Error: err.Error()})
		return
	}
	if !h.admit(ns, len(records)) {
		h.reply(w, http.StatusTooManyRequests, answer{Error: fmt.Sprintf("namespace %s reported more than %d decisions this second", ns, h.maxPerSec())})
		return
	}
	a := answer{}
	for i := range records {
		if records[i].Namespace != "" && records[i].Namespace != ns {
			a.Dropped++
			continue
		}
		h.Agg.Add(ns, &records[i])
		a.Counted++
	}
	if h.Metrics != nil {
		h.Metrics.Decisions.Add(float64(a.Counted))
		h.Metrics.Dropped.WithLabelValues("other_namespace").Add(float64(a.Dropped))
	}
	h.reply(w, http.StatusOK, a)
}

func (h *Handler) maxPerSec() int {
	if h.MaxPerSec <= 0 {
		return DefaultMaxDecisionsPerSecond
	}
	return h.MaxPerSec
}

// admit counts n decisions against ns's budget for the current second.
func (h *Handler) admit(ns string, n int) bool {
	now := time.Now
	if h.Now != nil {
		now = h.Now
	}
	sec := now().Unix()
	h.mu.Lock()
	defer h.mu.Unlock()
	if sec != h.rateSecond || h.rateCounted == nil || len(h.rateCounted) >= maxRateNamespaces {
		h.rateSecond, h.rateCounted = sec, map[string]int{}
	}
	if h.rateCounted[ns]+n > h.maxPerSec() {
		return false
	}
	h.rateCounted[ns] += n
	return true
}

// bearer is the request's bearer token.
func bearer(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
