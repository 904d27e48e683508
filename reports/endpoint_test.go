package reports

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/decisionlog"
	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/internal/testenv"
)

// tokenFor creates ServiceAccount sa in ns and returns a file holding a
// token for it from the real TokenRequest API, for audience.
func tokenFor(t *testing.T, ns, sa, audience string) string {
	t.Helper()
	ctx := context.Background()
	acct := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}
	if err := k8s.Create(ctx, acct); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	seconds := int64(600)
	tr := &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{Audiences: []string{audience}, ExpirationSeconds: &seconds}}
	if err := k8s.SubResource("token").Create(ctx, acct, tr); err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", ns, sa, err)
	}
	path := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(path, []byte(tr.Status.Token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// endpoint serves a Handler authenticating with the real TokenReview API.
type endpoint struct {
	url string
	agg *Aggregator
	h   *Handler
	now *clock
}

func newEndpoint(t *testing.T) *endpoint {
	t.Helper()
	c := &clock{time.Now().UTC().Truncate(time.Minute)}
	agg := NewAggregator(AggregatorOptions{Now: c.now})
	h := &Handler{Auth: &TokenReviewer{Client: k8s}, Agg: agg, Metrics: NewMetrics(), Now: c.now}
	mux := http.NewServeMux()
	mux.Handle(v1alpha1.ReportsPath, h)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &endpoint{url: srv.URL + v1alpha1.ReportsPath, agg: agg, h: h, now: c}
}

// sink sends events through the sidecar's real HTTP sink, labelled with
// namespace label as an injected sidecar's lines are, and returns how many
// it dropped because the endpoint refused them.
func sink(t *testing.T, url, tokenFile, label string, events []decisionlog.Event) float64 {
	t.Helper()
	dropped := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "dropped"}, []string{"sink", "reason"})
	log := decisionlog.New(decisionlog.Config{URL: url, TokenFile: tokenFile, Batch: 100, FlushInterval: time.Minute,
		Queue: 1000, QueueBytes: 1 << 20, Labels: []string{"namespace=" + label, "pod=agent-0"}},
		dropped, slog.New(slog.NewTextHandler(io.Discard, nil)))
	for i := range events {
		events[i].IDPrefix, events[i].ID = "t-", uint64(i+1)
		log.Record(&events[i])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := log.Close(ctx); err != nil { // sends what it holds
		t.Fatal(err)
	}
	return testutil.ToFloat64(dropped.WithLabelValues("http", "send_failed"))
}

func event(at time.Time, agent, tool string, d engine.Decision, e engine.Effect, policy, rule string) decisionlog.Event {
	return decisionlog.Event{At: at, AgentID: agent, ToolName: tool, Decision: d, Effect: e, PolicyID: policy, PolicyVersion: 1, RuleID: rule}
}

// knownSequence is a namespace's decisions over the last minutes before now.
func knownSequence(now time.Time) []decisionlog.Event {
	shadowed := event(now.Add(-30*time.Second), "ops", "rm", engine.Allow, engine.EffectAllow, "", "")
	shadowed.Shadow = []engine.ShadowVerdict{{Kind: engine.KindClusterPolicy, Policy: "guard", Decision: engine.Deny, Rule: "no-rm"}}
	return []decisionlog.Event{
		event(now.Add(-5*time.Minute), "shop", "pay", engine.Deny, engine.EffectDeny, "pay-cap", "over"),
		event(now.Add(-4*time.Minute), "auditor", "fetch", engine.Allow, engine.EffectAudit, "log-all", "all"),
		event(now.Add(-3*time.Minute), "w", "search", engine.Allow, engine.EffectWarn, "web", "slow"),
		event(now.Add(-2*time.Minute), "shop-2", "pay", engine.Deny, engine.EffectDeny, "pay-cap", "over"),
		event(now.Add(-time.Minute), "reader", "read", engine.Allow, engine.EffectAllow, "", ""),
		shadowed,
	}
}

// wantResult is what the test reads of one report result.
type wantResult struct {
	Policy, Rule, Result, Source, Message string
	Properties                            map[string]string
	Seconds                               int64
}

func knownReport(now time.Time) ([]wantResult, map[string]int64) {
	at := func(d time.Duration) int64 { return now.Add(d).Unix() }
	return []wantResult{
			{NoPolicy, "default", "pass", "toolgate", "2 calls allowed in the last 1h; the last: ops calling rm",
				map[string]string{"count": "2", "agent": "ops", "tool": "rm"}, at(-30 * time.Second)},
			{"log-all", "all", "skip", "toolgate", "1 call matched in audit mode in the last 1h; the last: auditor calling fetch",
				map[string]string{"count": "1", "agent": "auditor", "tool": "fetch"}, at(-4 * time.Minute)},
			{"pay-cap", "over", "fail", "toolgate", "2 calls denied in the last 1h; the last: shop-2 calling pay",
				map[string]string{"count": "2", "agent": "shop-2", "tool": "pay"}, at(-2 * time.Minute)},
			{"web", "slow", "warn", "toolgate", "1 call allowed with a warning in the last 1h; the last: w calling search",
				map[string]string{"count": "1", "agent": "w", "tool": "search"}, at(-3 * time.Minute)},
			{"guard", "no-rm", "skip", "toolgate", "1 call matched in audit mode in the last 1h; the last: ops calling rm",
				map[string]string{"count": "1", "agent": "ops", "tool": "rm", "kind": "ClusterPolicy"}, at(-30 * time.Second)},
		}, map[string]int64{
			"pass": 2, "fail": 2, "warn": 1, "skip": 2, "error": 0,
		}
}

// readReport reads the report of format in ns from the API server.
func readReport(t *testing.T, format, ns string) ([]wantResult, map[string]int64, *unstructured.Unstructured) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(GVK(format))
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: v1alpha1.ReportName}, u); err != nil {
		t.Fatalf("reading the %s report of %s: %v", format, ns, err)
	}
	var raw struct {
		Results []struct {
			wantResult
			Timestamp struct{ Seconds int64 }
		}
		Summary map[string]int64
	}
	b, _ := json.Marshal(u.Object)
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	out := make([]wantResult, 0, len(raw.Results))
	for _, r := range raw.Results {
		r.Seconds = r.Timestamp.Seconds
		out = append(out, r.wantResult)
	}
	return out, raw.Summary, u
}

func TestKnownDecisionsMakeTheExpectedReport(t *testing.T) {
	t.Parallel()
	for _, format := range []string{FormatOpenReports, FormatWGPolicy} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			ns := testenv.Namespace(t, k8s, "reports-")
			e := newEndpoint(t)
			token := tokenFor(t, ns, "agent", v1alpha1.ReportsAudience)
			if dropped := sink(t, e.url, token, ns, knownSequence(e.now.t)); dropped != 0 {
				t.Fatalf("the sink dropped %v events", dropped)
			}
			w := &Writer{Client: k8s, Agg: e.agg, Format: format, Window: time.Hour}
			if err := w.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			got, summary, u := readReport(t, format, ns)
			want, wantSummary := knownReport(e.now.t)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("results:\n got %+v\nwant %+v", got, want)
			}
			if !reflect.DeepEqual(summary, wantSummary) {
				t.Errorf("summary %v, want %v", summary, wantSummary)
			}
			if src, _, _ := unstructured.NestedString(u.Object, "source"); (src == "toolgate") != (format == FormatOpenReports) {
				t.Errorf("top-level source %q", src)
			}
			// Unchanged content is not written again.
			rv := u.GetResourceVersion()
			if err := w.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			if _, _, again := readReport(t, format, ns); again.GetResourceVersion() != rv {
				t.Errorf("an unchanged report was written again: resourceVersion %s -> %s", rv, again.GetResourceVersion())
			}
			// The window moves on: counts leave, and the report says so.
			e.now.t = e.now.t.Add(time.Hour + time.Minute)
			if err := w.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
			got, summary, _ = readReport(t, format, ns)
			if len(got) != 0 || summary["fail"] != 0 || summary["pass"] != 0 {
				t.Errorf("an hour later the report still holds %+v, summary %v", got, summary)
			}
		})
	}
}

func TestATokenOfOneNamespaceCannotReportForAnother(t *testing.T) {
	t.Parallel()
	a, b := testenv.Namespace(t, k8s, "reports-a-"), testenv.Namespace(t, k8s, "reports-b-")
	e := newEndpoint(t)
	tokenA := tokenFor(t, a, "agent", v1alpha1.ReportsAudience)
	// A's sidecar lines labelled as B's: the endpoint takes the namespace
	// from the token, and drops lines that claim another.
	if dropped := sink(t, e.url, tokenA, b, knownSequence(e.now.t)); dropped != 0 {
		t.Fatalf("the sink dropped %v events", dropped)
	}
	if ns := e.agg.Namespaces(); len(ns) != 0 {
		t.Fatalf("lines claiming namespace %s sent with %s's token were counted for %v", b, a, ns)
	}
	if got := testutil.ToFloat64(e.h.Metrics.Dropped.WithLabelValues("other_namespace")); got != 6 {
		t.Errorf("other_namespace drops %v, want 6", got)
	}
	w := &Writer{Client: k8s, Agg: e.agg, Format: FormatOpenReports, Window: time.Hour}
	if err := w.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(OpenReportsGVK)
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: b, Name: v1alpha1.ReportName}, u); !apierrors.IsNotFound(err) {
		t.Errorf("namespace %s has a report made of %s's token: %v", b, a, err)
	}
}

// post sends body to the endpoint with the token in tokenFile ("" for
// none) and returns the status and the error the endpoint gave.
func post(t *testing.T, url, token, body string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var a answer
	_ = json.NewDecoder(resp.Body).Decode(&a)
	return resp.StatusCode, a.Error
}

func readToken(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

const oneLine = `[{"time":"2026-03-01T12:00:00Z","tool_name":"pay","decision":"deny","effect":"deny","matched_policy_id":"p","matched_rule_id":"r"}]`

func TestEndpointRefusals(t *testing.T) {
	t.Parallel()
	ns := testenv.Namespace(t, k8s, "reports-")
	e := newEndpoint(t)
	e.h.MaxBody = 1 << 10
	e.h.MaxPerSec = 3
	good := readToken(t, tokenFor(t, ns, "agent", v1alpha1.ReportsAudience))
	apiToken := readToken(t, tokenFor(t, ns, "agent", "https://kubernetes.default.svc"))
	for _, c := range []struct {
		name, token, body string
		code              int
		want              string
	}{
		{"no token", "", oneLine, 401, "no bearer token"},
		{"a token the API server never issued", "not-a-token", oneLine, 401, "not valid for the audience toolgate.dev/reports"},
		{"a token for the API server", apiToken, oneLine, 401, "not valid for the audience toolgate.dev/reports"},
		{"oversize", good, "[" + strings.Repeat(" ", 2<<10) + "]", 413, "more than 1024"},
		{"not JSON", good, "hello", 400, "not a JSON array of decision log lines"},
		{"a line without its time", good, `[{"tool_name":"t","decision":"allow","effect":"allow"}]`, 400, `line 0: no "time"`},
		{"accepted", good, oneLine, 200, ""},
		{"past the namespace's rate", good, "[" + strings.Repeat(oneLine[1:len(oneLine)-1]+",", 2) + oneLine[1:], 429, "more than 3 decisions this second"},
	} {
		code, msg := post(t, e.url, c.token, c.body)
		if code != c.code || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %d %q, want %d saying %q", c.name, code, msg, c.code, c.want)
		}
	}
	// A body sent without its length (chunked) is cut at the limit too.
	req, _ := http.NewRequest(http.MethodPost, e.url, struct{ io.Reader }{strings.NewReader("[" + strings.Repeat(" ", 2<<10) + "]")})
	req.Header.Set("Authorization", "Bearer "+good)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if req.ContentLength != 0 || resp.StatusCode != http.StatusRequestEntityTooLarge {
		t.Errorf("chunked oversize (length %d): %d, want 413", req.ContentLength, resp.StatusCode)
	}
	req, _ = http.NewRequest(http.MethodGet, e.url, nil)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", resp.StatusCode)
	}
}

// TestRefusedBatchesAreDroppedBySidecars: a sidecar whose token the
// endpoint refuses, or whose endpoint is down, drops its batches and counts
// them; recording a decision never waits for either.
func TestRefusedBatchesAreDroppedBySidecars(t *testing.T) {
	t.Parallel()
	ns := testenv.Namespace(t, k8s, "reports-")
	e := newEndpoint(t)
	wrong := tokenFor(t, ns, "agent", "https://kubernetes.default.svc")
	events := knownSequence(e.now.t)
	if dropped := sink(t, e.url, wrong, ns, events); dropped != float64(len(events)) {
		t.Errorf("refused: the sink counted %v dropped, want %d", dropped, len(events))
	}
	missing := filepath.Join(t.TempDir(), "no-token")
	if dropped := sink(t, e.url, missing, ns, knownSequence(e.now.t)); dropped != float64(len(events)) {
		t.Errorf("no token file: the sink counted %v dropped, want %d", dropped, len(events))
	}
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	if dropped := sink(t, down.URL, wrong, ns, knownSequence(e.now.t)); dropped != float64(len(events)) {
		t.Errorf("endpoint down: the sink counted %v dropped, want %d", dropped, len(events))
	}
	if ns := e.agg.Namespaces(); len(ns) != 0 {
		t.Errorf("refused batches were counted: %v", ns)
	}
}
