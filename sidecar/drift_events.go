package sidecar

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/toolgate/toolgate/api/v1alpha1"
	"github.com/toolgate/toolgate/bundlesource"
	"github.com/toolgate/toolgate/mcp"
	"github.com/toolgate/toolgate/mcp/pin"
)

// ReportingController is the reportingController of the sidecar's Events.
const ReportingController = "toolgate.dev/sidecar"

// maxPendingDriftEvents bounds the Events waiting to be written: past it a
// drift is logged and counted, not written (the API server is slow or
// refusing, and the list must not wait).
const maxPendingDriftEvents = 64

// startDriftEvents makes each drift of a pinned MCP upstream's tools a
// Warning Event on its MCPUpstream, when the bundle source reads the API
// (--configmap): the sidecar's namespace is the upstream's, and the
// injector's Role lets it create Events there. Without API access drifts
// are logged and counted only.
func (s *Server) startDriftEvents(ctx context.Context, src bundlesource.Source) error {
	if s.mcp == nil {
		return nil
	}
	api, ok := src.(interface{ API() (*rest.Config, string) })
	if !ok {
		return nil
	}
	cfg, namespace := api.API()
	c, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("drift events: %w", err)
	}
	w := &driftEvents{events: c.Events(namespace), namespace: namespace, log: s.log, pending: make(chan mcp.Drift, maxPendingDriftEvents)}
	w.instance, _ = os.Hostname()
	go w.run(ctx)
	s.mcp.SetDriftRecorder(w)
	return nil
}

type driftEvents struct {
	events    corev1client.EventInterface
	namespace string
	instance  string
	log       *slog.Logger
	pending   chan mcp.Drift
}

// ToolDrifted queues the Event; it never blocks the list being filtered.
func (w *driftEvents) ToolDrifted(d mcp.Drift) {
	select {
	case w.pending <- d:
	default:
		w.log.Warn("too many drift Events waiting to be written: this one is only logged", "upstream", d.Upstream, "tool", d.Tool)
	}
}

func (w *driftEvents) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case d := <-w.pending:
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			if _, err := w.events.Create(wctx, w.event(d), metav1.CreateOptions{}); err != nil {
				w.log.Warn("writing the drift Event on the MCPUpstream failed", "upstream", d.Upstream, "tool", d.Tool, "err", err)
			}
			cancel()
		}
	}
}

// event is the Warning Event on the MCPUpstream d.Upstream names.
func (w *driftEvents) event(d mcp.Drift) *corev1.Event {
	reason := v1alpha1.ReasonToolDefinitionChanged
	if d.Kind == pin.Unpinned {
		reason = v1alpha1.ReasonToolNotPinned
	}
	now := metav1.Now()
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{GenerateName: d.Upstream + ".", Namespace: w.namespace},
		InvolvedObject: corev1.ObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "MCPUpstream",
			Namespace: w.namespace, Name: d.Upstream},
		Reason:  reason,
		Message: fmt.Sprintf("%s (digest %s)", d.Message, d.Digest),
		Type:    corev1.EventTypeWarning,
		Source:  corev1.EventSource{Component: ReportingController, Host: w.instance},
		Count:   1, FirstTimestamp: now, LastTimestamp: now,
		ReportingController: ReportingController, ReportingInstance: w.instance,
		Action: "ListTools",
	}
}
