package sidecar

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

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
	sessionID        string
	toolUseID        string
	framework        string
	decision         engine.Decision
	code             engine.Code
	reason           string
	policyID         string
	policyVersion    int64
	ruleID           string
	revision         string
	latency          time.Duration
	// req is set only when --log-fields selects request fields. The
	// handler never touches it after recording, so sinks may read it.
	req engine.Request
}

// sink is one destination with its own bounded queue: a slow HTTP sink
// drops its own events without affecting stdout, and neither ever blocks
// a decision.
type sink struct {
	name    string
	queue   chan event
	full    prometheus.Counter
	stop    chan struct{}
	stopped chan struct{}
}

func newSink(name string, size int, m *metrics) *sink {
	return &sink{name: name, queue: make(chan event, size),
		full: m.logDropped.WithLabelValues(name, "queue_full"),
		stop: make(chan struct{}), stopped: make(chan struct{})}
}

// offer never waits: a full queue drops the event and counts it.
func (k *sink) offer(ev *event) {
	select {
	case k.queue <- *ev:
	default:
		k.full.Inc()
	}
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
		k := newSink("stdout", o.DecisionLogQueue, m)
		go runWriterSink(k, w, format)
		d.sinks = append(d.sinks, k)
	}
	if o.DecisionLogURL != "" {
		k := newSink("http", o.DecisionLogQueue, m)
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
	if ev.mismatch {
		dst = append(dst, `,"requested_agent_id":`...)
		dst = engine.AppendJSONString(dst, ev.requestedAgentID)
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
	if ev.code != "" {
		dst = append(dst, `,"code":`...)
		dst = engine.AppendJSONString(dst, string(ev.code))
	}
	if ev.reason != "" {
		dst = append(dst, `,"reason":`...)
		dst = engine.AppendJSONString(dst, ev.reason)
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
