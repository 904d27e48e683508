package sidecar

import (
	"context"
	"encoding/json"
	"errors"
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

// event is one decision as the log sees it. It is sent by value through the
// sinks' channels; formatting happens on the sinks' goroutines, off the
// decision path.
type event struct {
	at               time.Time
	idPrefix         string
	id               uint64
	toolName         string
	agentID          string
	requestedAgentID string
	mismatch         bool
	// What the client sent for a field --roles or --environment bound,
	// when it differed.
	requestedRoles       string
	rolesMismatch        bool
	requestedEnvironment string
	environmentMismatch  bool
	sessionID            string
	// traceID and spanID come from the request's traceparent header.
	traceID       string
	spanID        string
	toolUseID     string
	framework     string
	decision      engine.Decision
	effect        engine.Effect
	warnings      []string
	code          engine.Code
	reason        string
	policyID      string
	policyVersion int64
	ruleID        string
	revision      string
	latency       time.Duration
	// req is set only when --log-fields selects request fields. The
	// handler never touches it after recording, so sinks may read it.
	req engine.Request
	// bodyBytes is the size of the request body: what req holds is
	// counted as that much against the queue's byte bound.
	bodyBytes int
}

// eventSize is the struct as a queue slot holds it.
const eventSize = int64(unsafe.Sizeof(event{}))

// size is what ev costs while it waits in a queue: its slot, the strings
// it points to, and the request when it is kept for --log-fields.
func (ev *event) size() int64 {
	n := eventSize + int64(len(ev.idPrefix)+len(ev.toolName)+len(ev.agentID)+len(ev.requestedAgentID)+
		len(ev.sessionID)+len(ev.toolUseID)+len(ev.framework)+len(ev.reason)+len(ev.policyID)+
		len(ev.ruleID)+len(ev.revision)+len(ev.code)+len(ev.requestedRoles)+len(ev.requestedEnvironment)+
		len(ev.traceID)+len(ev.spanID))
	for _, w := range ev.warnings {
		n += int64(len(w)) + 16 // the string header
	}
	if ev.req != nil {
		n += int64(ev.bodyBytes)
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
	queue    chan event
	bytes    atomic.Int64 // held by queued events, by event.size
	maxBytes int64
	full     prometheus.Counter
	stop     chan struct{}
	stopped  chan struct{}
}

// newSink sizes the channel to the smaller bound, so its slots alone never
// take more than maxBytes.
func newSink(name string, events, maxBytes int, m *metrics) *sink {
	events = int(min(int64(events), max(1, int64(maxBytes)/eventSize)))
	return &sink{name: name, queue: make(chan event, events), maxBytes: int64(maxBytes),
		full: m.logDropped.WithLabelValues(name, "queue_full"),
		stop: make(chan struct{}), stopped: make(chan struct{})}
}

// offer never waits: a queue full in events or bytes drops the event and
// counts it.
func (k *sink) offer(ev *event) {
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
func (k *sink) take(ev *event) {
	k.bytes.Add(-ev.size())
}

type decisionLog struct {
	sinks     []*sink
	format    *lineFormat
	closeOnce sync.Once
}

// lineFormat is what every line of one sidecar shares: the request fields
// to copy, and the static labels, encoded once.
type lineFormat struct {
	fields *fieldSelector
	labels []byte // `,"labels":{...}`, or nothing
}

func newLineFormat(o Options) *lineFormat {
	f := &lineFormat{fields: newFieldSelector(o.LogFields, o.Redact)}
	labels, _ := parseLogLabels(o.LogLabels) // Validate has reported errors
	if len(labels) > 0 {
		f.labels = append(f.labels, `,"labels":{`...)
		for i, l := range labels {
			if i > 0 {
				f.labels = append(f.labels, ',')
			}
			f.labels = engine.AppendJSONString(f.labels, l.key)
			f.labels = append(f.labels, ':')
			f.labels = engine.AppendJSONString(f.labels, l.value)
		}
		f.labels = append(f.labels, '}')
	}
	return f
}

func newDecisionLog(o Options, m *metrics, log *slog.Logger) *decisionLog {
	format := newLineFormat(o)
	d := &decisionLog{format: format}
	if o.DecisionLog == DecisionLogStdout {
		w := o.DecisionLogWriter
		if w == nil {
			w = os.Stdout
		}
		k := newSink("stdout", o.DecisionLogQueue, o.DecisionLogQueueBytes, m)
		go runWriterSink(k, w, format)
		d.sinks = append(d.sinks, k)
	}
	if o.DecisionLogURL != "" {
		k := newSink("http", o.DecisionLogQueue, o.DecisionLogQueueBytes, m)
		h := &httpSink{sink: k, url: o.DecisionLogURL, batch: o.DecisionLogBatch, every: o.DecisionLogFlushInterval,
			format: format, failed: m.logDropped.WithLabelValues("http", "send_failed"), log: log}
		go h.run()
		d.sinks = append(d.sinks, k)
	}
	return d
}

func (d *decisionLog) enabled() bool      { return len(d.sinks) > 0 }
func (d *decisionLog) wantsRequest() bool { return d.format.fields != nil }

func (d *decisionLog) record(ev *event) {
	for _, k := range d.sinks {
		k.offer(ev)
	}
}

// close asks every sink to write what it holds and waits for them until ctx
// ends.
func (d *decisionLog) close(ctx context.Context) error {
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
func appendEvent(dst []byte, ev *event, f *lineFormat) []byte {
	dst = append(dst, `{"time":"`...)
	dst = ev.at.UTC().AppendFormat(dst, time.RFC3339Nano)
	dst = append(dst, `","decision_id":"`...)
	dst = append(dst, ev.idPrefix...)
	dst = strconv.AppendUint(dst, ev.id, 36)
	dst = append(dst, `","session_id":`...)
	dst = engine.AppendNullableJSONString(dst, ev.sessionID)
	dst = append(dst, `,"agent_id":`...)
	dst = engine.AppendNullableJSONString(dst, ev.agentID)
	if ev.traceID != "" {
		// Both are lower-case hex (parseTraceparent): no escaping needed.
		dst = append(dst, `,"trace_id":"`...)
		dst = append(dst, ev.traceID...)
		dst = append(dst, `","span_id":"`...)
		dst = append(dst, ev.spanID...)
		dst = append(dst, '"')
	}
	if ev.mismatch {
		dst = append(dst, `,"requested_agent_id":`...)
		dst = engine.AppendJSONString(dst, ev.requestedAgentID)
	}
	if ev.rolesMismatch {
		dst = append(dst, `,"requested_roles":`...)
		dst = engine.AppendJSONString(dst, ev.requestedRoles)
	}
	if ev.environmentMismatch {
		dst = append(dst, `,"requested_environment":`...)
		dst = engine.AppendJSONString(dst, ev.requestedEnvironment)
	}
	dst = append(dst, `,"tool_name":`...)
	dst = engine.AppendJSONString(dst, ev.toolName)
	if ev.toolUseID != "" {
		dst = append(dst, `,"tool_use_id":`...)
		dst = engine.AppendJSONString(dst, ev.toolUseID)
	}
	if ev.framework != "" {
		dst = append(dst, `,"framework":`...)
		dst = engine.AppendJSONString(dst, ev.framework)
	}
	dst = append(dst, `,"decision":`...)
	dst = engine.AppendJSONString(dst, string(ev.decision))
	dst = append(dst, `,"effect":`...)
	dst = engine.AppendJSONString(dst, string(ev.effect))
	if ev.code != "" {
		dst = append(dst, `,"code":`...)
		dst = engine.AppendJSONString(dst, string(ev.code))
	}
	if ev.reason != "" {
		dst = append(dst, `,"reason":`...)
		dst = engine.AppendJSONString(dst, ev.reason)
	}
	if ev.warnings != nil {
		dst = append(dst, `,"warnings":[`...)
		for i, w := range ev.warnings {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = engine.AppendJSONString(dst, w)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, `,"matched_policy_id":`...)
	dst = engine.AppendNullableJSONString(dst, ev.policyID)
	dst = append(dst, `,"matched_policy_version":`...)
	if ev.policyID == "" {
		dst = append(dst, "null"...)
	} else {
		dst = strconv.AppendInt(dst, ev.policyVersion, 10)
	}
	dst = append(dst, `,"matched_rule_id":`...)
	dst = engine.AppendNullableJSONString(dst, ev.ruleID)
	dst = append(dst, `,"bundle_revision":`...)
	dst = engine.AppendNullableJSONString(dst, ev.revision)
	dst = append(dst, `,"latency_ms":`...)
	dst = strconv.AppendFloat(dst, float64(ev.latency.Nanoseconds())/1e6, 'f', -1, 64)
	dst = append(dst, f.labels...)
	if f.fields != nil && ev.req != nil {
		if b, err := json.Marshal(f.fields.project(ev.req)); err == nil {
			dst = append(dst, `,"request":`...)
			dst = append(dst, b...)
		} else {
			dst = append(dst, `,"request_error":`...)
			dst = engine.AppendJSONString(dst, err.Error())
		}
	}
	return append(dst, '}')
}
