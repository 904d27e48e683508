package decisionlog

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgate/toolgate/engine"
)

// Event is one decision as the log sees it. It is sent by value through the
// sinks' channels; formatting happens on the sinks' goroutines, off the
// decision path.
type Event struct {
	At               time.Time
	IDPrefix         string
	ID               uint64
	ToolName         string
	AgentID          string
	RequestedAgentID string
	AgentMismatch    bool
	// What the client sent for a field --roles or --environment bound,
	// when it differed.
	RequestedRoles       string
	RolesMismatch        bool
	RequestedEnvironment string
	EnvironmentMismatch  bool
	SessionID            string
	// TraceID and SpanID come from the request's traceparent header.
	TraceID       string
	SpanID        string
	ToolUseID     string
	Framework     string
	Decision      engine.Decision
	Effect        engine.Effect
	Warnings      []string
	Code          engine.Code
	Reason        string
	PolicyID      string
	PolicyVersion int64
	RuleID        string
	// PolicyKind is the level that decided (Policy, ClusterPolicy) in a
	// bundle with ClusterPolicies.
	PolicyKind       string
	ExceptionApplied string
	Shadow           []engine.ShadowVerdict
	// Approval names the ApprovalRequest of an asked call (ask, or the
	// allow or deny it settled into); Waited is how long the answer was
	// held for a person, left out of Latency.
	Approval string
	Waited   time.Duration
	// Phase is PhaseResult for a result decision (what a tool returned),
	// empty for a call's. Explanations and Redactions are a result
	// decision's: per rule that ran, and the spans replaced (positions and
	// lengths only, never what they held).
	Phase        engine.Phase
	Explanations []engine.Explanation
	Redactions   []engine.Redaction
	// ServiceAccount is the one the sidecar runs as: with the agent id,
	// the identity toolgate replay decides for again.
	ServiceAccount string
	Revision       string
	Latency        time.Duration
	// Request is set only when --log-fields selects request fields. The
	// decider never touches it after recording, so sinks may read it.
	Request engine.Request
	// BodyBytes is the size of the request body: what Request holds is
	// counted as that much against the queue's byte bound.
	BodyBytes int
}

// EventSize is the struct as a queue slot holds it.
const EventSize = int64(unsafe.Sizeof(Event{}))

// size is what ev costs while it waits in a queue: its slot, the strings
// it points to, and the request when it is kept for --log-fields.
func (ev *Event) size() int64 {
	n := EventSize + int64(len(ev.IDPrefix)+len(ev.ToolName)+len(ev.AgentID)+len(ev.RequestedAgentID)+
		len(ev.SessionID)+len(ev.ToolUseID)+len(ev.Framework)+len(ev.Reason)+len(ev.PolicyID)+
		len(ev.RuleID)+len(ev.Revision)+len(ev.Code)+len(ev.RequestedRoles)+len(ev.RequestedEnvironment)+
		len(ev.TraceID)+len(ev.SpanID)+len(ev.PolicyKind)+len(ev.ExceptionApplied)+len(ev.ServiceAccount))
	for i := range ev.Shadow {
		n += int64(len(ev.Shadow[i].Kind)+len(ev.Shadow[i].Policy)+len(ev.Shadow[i].Rule)) + 80 // the entry
	}
	for _, w := range ev.Warnings {
		n += int64(len(w)) + 16 // the string header
	}
	for i := range ev.Explanations {
		x := &ev.Explanations[i]
		n += int64(len(x.PolicyID)+len(x.RuleID)+len(x.Sentence)) + 96 // the entry
	}
	n += int64(len(ev.Redactions)) * 64
	if ev.Request != nil {
		n += int64(ev.BodyBytes)
	}
	return n
}

// sink is one destination with its own bounded queue: a slow HTTP sink
// drops its own events without affecting stdout, and neither ever blocks
// a decision. The queue is bounded twice: in events (the channel, whose
// slots are allocated up front) and in bytes (what the queued events hold,
// strings and logged requests included, which the event count alone
// leaves unbounded).
type sink struct {
	name     string
	queue    chan Event
	bytes    atomic.Int64 // held by queued events, by event.size
	maxBytes int64
	full     prometheus.Counter
	stop     chan struct{}
	stopped  chan struct{}
}

// newSink sizes the channel to the smaller bound, so its slots alone never
// take more than maxBytes.
func newSink(name string, events, maxBytes int, dropped *prometheus.CounterVec) *sink {
	events = int(min(int64(events), max(1, int64(maxBytes)/EventSize)))
	return &sink{name: name, queue: make(chan Event, events), maxBytes: int64(maxBytes),
		full: dropped.WithLabelValues(name, "queue_full"),
		stop: make(chan struct{}), stopped: make(chan struct{})}
}

// offer never waits: a queue full in events or bytes drops the event and
// counts it.
func (k *sink) offer(ev *Event) {
	n := ev.size()
	if k.bytes.Add(n) > k.maxBytes {
		k.bytes.Add(-n)
		k.full.Inc()
		return
	}
	select {
	case k.queue <- *ev:
	default:
		k.bytes.Add(-n)
		k.full.Inc()
	}
}

// take is the only way events leave the queue: it returns their bytes.
func (k *sink) take(ev *Event) {
	k.bytes.Add(-ev.size())
}

// Log is the decision log: every decision recorded goes to each sink's
// own bounded queue, and is formatted and written on the sink's goroutine.
type Log struct {
	sinks     []*sink
	format    *lineFormat
	closeOnce sync.Once
}

// Config is where the log's lines go and what they hold: the sidecar's
// --decision-log* flags, --log-fields, --redact and --decision-log-label,
// already validated (Check* and ParseLabels).
type Config struct {
	// Stdout writes one line per decision to Writer (os.Stdout when nil).
	Stdout bool
	Writer io.Writer
	// URL, when set, also POSTs lines in batches of Batch, a partial batch
	// at most FlushInterval after its oldest line.
	URL string
	// TokenFile, when set, holds a bearer token sent with each batch to
	// URL; it is read again for every batch, since a projected
	// ServiceAccount token is rotated in place by the kubelet.
	TokenFile     string
	Batch         int
	FlushInterval time.Duration
	// Queue and QueueBytes bound each sink's queue, in events and bytes.
	Queue      int
	QueueBytes int
	Fields     []string
	Redact     []string
	Labels     []string
}

// lineFormat is what every line of one sidecar shares: the request fields
// to copy, and the static labels, encoded once.
type lineFormat struct {
	fields *fieldSelector
	// redact are the --redact paths, kept apart from fields for previews
	// (Preview), which hide them whatever --log-fields selects.
	redact []redactPath
	labels []byte // `,"labels":{...}`, or nothing
}

func newLineFormat(c Config) *lineFormat {
	f := &lineFormat{fields: newFieldSelector(c.Fields, c.Redact)}
	for _, p := range c.Redact {
		if r, err := parseRedactPath(p); err == nil {
			f.redact = append(f.redact, r)
		}
	}
	labels, _ := ParseLabels(c.Labels) // the caller has checked them
	if len(labels) > 0 {
		f.labels = append(f.labels, `,"labels":{`...)
		for i, l := range labels {
			if i > 0 {
				f.labels = append(f.labels, ',')
			}
			f.labels = engine.AppendJSONString(f.labels, l.Key)
			f.labels = append(f.labels, ':')
			f.labels = engine.AppendJSONString(f.labels, l.Value)
		}
		f.labels = append(f.labels, '}')
	}
	return f
}

// New starts the sinks c names; Close stops them. dropped counts the events
// a sink drops, by sink and reason (queue_full, send_failed).
func New(c Config, dropped *prometheus.CounterVec, log *slog.Logger) *Log {
	format := newLineFormat(c)
	d := &Log{format: format}
	if c.Stdout {
		w := c.Writer
		if w == nil {
			w = os.Stdout
		}
		k := newSink("stdout", c.Queue, c.QueueBytes, dropped)
		go runWriterSink(k, w, format)
		d.sinks = append(d.sinks, k)
	}
	if c.URL != "" {
		k := newSink("http", c.Queue, c.QueueBytes, dropped)
		h := &httpSink{sink: k, url: c.URL, tokenFile: c.TokenFile, batch: c.Batch, every: c.FlushInterval,
			format: format, failed: dropped.WithLabelValues("http", "send_failed"), log: log}
		go h.run()
		d.sinks = append(d.sinks, k)
	}
	return d
}

// Enabled tells whether any sink is kept: when none is, the decider does
// not fill events at all.
func (d *Log) Enabled() bool { return len(d.sinks) > 0 }

// WantsRequest tells whether lines carry request fields (--log-fields), so
// the event must hold the request.
func (d *Log) WantsRequest() bool { return d.format.fields != nil }

// Record offers ev to every sink; it never waits.
func (d *Log) Record(ev *Event) {
	for _, k := range d.sinks {
		k.offer(ev)
	}
}

// Close asks every sink to write what it holds and waits for them until ctx
// ends.
func (d *Log) Close(ctx context.Context) error {
	d.closeOnce.Do(func() {
		for _, k := range d.sinks {
			close(k.stop)
		}
	})
	for _, k := range d.sinks {
		select {
		case <-k.stopped:
		case <-ctx.Done():
			return errors.New("decision log: gave up flushing the " + k.name + " sink: " + ctx.Err().Error())
		}
	}
	return nil
}

// appendEvent writes one decision log line (without the newline).
func appendEvent(dst []byte, ev *Event, f *lineFormat) []byte {
	dst = append(dst, `{"time":"`...)
	dst = ev.At.UTC().AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","decision_id":"`...)
	dst = append(dst, ev.IDPrefix...)
	dst = strconv.AppendUint(dst, ev.ID, 36)
	dst = append(dst, `","session_id":`...)
	dst = engine.AppendNullableJSONString(dst, ev.SessionID)
	dst = append(dst, `,"agent_id":`...)
	dst = engine.AppendNullableJSONString(dst, ev.AgentID)
	if ev.ServiceAccount != "" {
		dst = append(dst, `,"service_account":`...)
		dst = engine.AppendJSONString(dst, ev.ServiceAccount)
	}
	if ev.TraceID != "" {
		// Both are lower-case hex (parseTraceparent): no escaping needed.
		dst = append(dst, `,"trace_id":"`...)
		dst = append(dst, ev.TraceID...)
		dst = append(dst, `","span_id":"`...)
		dst = append(dst, ev.SpanID...)
		dst = append(dst, '"')
	}
	if ev.AgentMismatch {
		dst = append(dst, `,"requested_agent_id":`...)
		dst = engine.AppendJSONString(dst, ev.RequestedAgentID)
	}
	if ev.RolesMismatch {
		dst = append(dst, `,"requested_roles":`...)
		dst = engine.AppendJSONString(dst, ev.RequestedRoles)
	}
	if ev.EnvironmentMismatch {
		dst = append(dst, `,"requested_environment":`...)
		dst = engine.AppendJSONString(dst, ev.RequestedEnvironment)
	}
	dst = append(dst, `,"tool_name":`...)
	dst = engine.AppendJSONString(dst, ev.ToolName)
	if ev.ToolUseID != "" {
		dst = append(dst, `,"tool_use_id":`...)
		dst = engine.AppendJSONString(dst, ev.ToolUseID)
	}
	if ev.Framework != "" {
		dst = append(dst, `,"framework":`...)
		dst = engine.AppendJSONString(dst, ev.Framework)
	}
	dst = append(dst, `,"decision":`...)
	dst = engine.AppendJSONString(dst, string(ev.Decision))
	dst = append(dst, `,"effect":`...)
	dst = engine.AppendJSONString(dst, string(ev.Effect))
	if ev.Code != "" {
		dst = append(dst, `,"code":`...)
		dst = engine.AppendJSONString(dst, string(ev.Code))
	}
	if ev.Reason != "" {
		dst = append(dst, `,"reason":`...)
		dst = engine.AppendJSONString(dst, ev.Reason)
	}
	if ev.Warnings != nil {
		dst = append(dst, `,"warnings":[`...)
		for i, w := range ev.Warnings {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = engine.AppendJSONString(dst, w)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"matched_policy_id":`...)
	dst = engine.AppendNullableJSONString(dst, ev.PolicyID)
	dst = append(dst, `,"matched_policy_version":`...)
	if ev.PolicyID == "" {
		dst = append(dst, "null"...)
	} else {
		dst = strconv.AppendInt(dst, ev.PolicyVersion, 10)
	}
	dst = append(dst, `,"matched_rule_id":`...)
	dst = engine.AppendNullableJSONString(dst, ev.RuleID)
	if ev.PolicyKind != "" {
		dst = append(dst, `,"matched_policy_kind":`...)
		dst = engine.AppendJSONString(dst, ev.PolicyKind)
	}
	if ev.ExceptionApplied != "" {
		dst = append(dst, `,"exception_applied":`...)
		dst = engine.AppendJSONString(dst, ev.ExceptionApplied)
	}
	if ev.Shadow != nil {
		dst = appendShadow(dst, ev.Shadow)
	}
	if ev.Approval != "" {
		dst = append(dst, `,"approval":`...)
		dst = engine.AppendJSONString(dst, ev.Approval)
		dst = append(dst, `,"approval_wait_ms":`...)
		dst = strconv.AppendInt(dst, ev.Waited.Milliseconds(), 10)
	}
	if ev.Phase != "" {
		dst = appendResultPhase(dst, ev)
	}
	dst = append(dst, `,"bundle_revision":`...)
	dst = engine.AppendNullableJSONString(dst, ev.Revision)
	dst = append(dst, `,"latency_ms":`...)
	dst = strconv.AppendFloat(dst, float64(ev.Latency.Nanoseconds())/1e6, 'f', -1, 64)
	dst = append(dst, f.labels...)
	if f.fields != nil && ev.Request != nil {
		if b, err := json.Marshal(f.fields.project(ev.Request)); err == nil {
			dst = append(dst, `,"request":`...)
			dst = append(dst, b...)
		} else {
			dst = append(dst, `,"request_error":`...)
			dst = engine.AppendJSONString(dst, err.Error())
		}
	}
	return append(dst, '}')
}

// HeldBytes is what the queued events of every sink hold now, by
// Event.size: never more than Config.QueueBytes per sink.
func (d *Log) HeldBytes() int64 {
	var n int64
	for _, k := range d.sinks {
		n += k.bytes.Load()
	}
	return n
}

// appendShadow writes the Audit policies' verdicts as the answer's
// "shadow" shows them.
func appendShadow(dst []byte, shadow []engine.ShadowVerdict) []byte {
	dst = append(dst, `,"shadow":[`...)
	for i := range shadow {
		v := &shadow[i]
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '{')
		if v.Kind != "" {
			dst = append(dst, `"kind":`...)
			dst = engine.AppendJSONString(dst, v.Kind)
			dst = append(dst, ',')
		}
		dst = append(dst, `"policy":`...)
		dst = engine.AppendJSONString(dst, v.Policy)
		dst = append(dst, `,"decision":`...)
		dst = engine.AppendJSONString(dst, string(v.Decision))
		if v.Rule != "" {
			dst = append(dst, `,"rule":`...)
			dst = engine.AppendJSONString(dst, v.Rule)
		}
		dst = append(dst, '}')
	}
	return append(dst, ']')
}

// appendResultPhase writes a result decision's phase, explanations and
// redactions (positions only: the decision log never holds what a tool
// returned).
func appendResultPhase(dst []byte, ev *Event) []byte {
	dst = append(dst, `,"phase":`...)
	dst = engine.AppendJSONString(dst, string(ev.Phase))
	if len(ev.Explanations) > 0 {
		if b, err := json.Marshal(ev.Explanations); err == nil {
			dst = append(dst, `,"explanations":`...)
			dst = append(dst, b...)
		}
	}
	if len(ev.Redactions) > 0 {
		dst = append(dst, `,"redactions":[`...)
		for i := range ev.Redactions {
			r := &ev.Redactions[i]
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = append(dst, `{"start":`...)
			dst = strconv.AppendInt(dst, int64(r.Start), 10)
			dst = append(dst, `,"length":`...)
			dst = strconv.AppendInt(dst, int64(r.End-r.Start), 10)
			dst = append(dst, `,"policy_id":`...)
			dst = engine.AppendJSONString(dst, r.PolicyID)
			dst = append(dst, `,"rule_id":`...)
			dst = engine.AppendJSONString(dst, r.RuleID)
			dst = append(dst, '}')
		}
		dst = append(dst, ']')
	}
	return dst
}
