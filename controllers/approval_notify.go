package controllers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// Notice is the JSON body POSTed to the notify URL for each new
// ApprovalRequest: enough for a chat message or a ticket that a person
// can act on without opening the cluster. Every field is always present
// (empty when the call has no server or action), so a receiver's template
// needs no conditionals.
type Notice struct {
	Name      string    `json:"name"`
	Namespace string    `json:"namespace"`
	Agent     string    `json:"agent"`
	Tool      string    `json:"tool"`
	Server    string    `json:"server"`
	Action    string    `json:"action"`
	Preview   string    `json:"preview"`
	Reason    string    `json:"reason"`
	ExpiresAt time.Time `json:"expiresAt"`
	// ApproveCommand is `toolgate approve NAME -n NS`.
	ApproveCommand string `json:"approveCommand"`
	// KubectlCommand is the same status write with kubectl alone.
	KubectlCommand string `json:"kubectlCommand"`
}

func newNotice(ar *v1alpha1.ApprovalRequest) Notice {
	return Notice{Name: ar.Name, Namespace: ar.Namespace, Agent: ar.Spec.AgentID, Tool: ar.Spec.Tool,
		Server: ar.Spec.Server, Action: ar.Spec.Action, Preview: ar.Spec.Preview, Reason: ar.Spec.Reason,
		ExpiresAt: ar.Spec.ExpiresAt.UTC(), ApproveCommand: approveCommand(ar), KubectlCommand: kubectlApproveCommand(ar)}
}

// approveCommand and kubectlApproveCommand are what a person types to
// approve ar. Names and namespaces are DNS names, safe in a shell
// unquoted; "<you>" is left for the approver, whose user name the
// admission policy requires in decidedBy.
func approveCommand(ar *v1alpha1.ApprovalRequest) string {
	return fmt.Sprintf("toolgate approve %s -n %s", ar.Name, ar.Namespace)
}

func kubectlApproveCommand(ar *v1alpha1.ApprovalRequest) string {
	return fmt.Sprintf(`kubectl patch approvalrequest %s -n %s --subresource=status --type=merge -p '{"status":{"decision":"Approved","decidedBy":"<you>"}}'`,
		ar.Name, ar.Namespace)
}

// notifier POSTs notices from a bounded queue in the background: enqueue
// never waits, so a slow or dead receiver never holds a reconcile (and so
// never a decision, which needs no reconcile at all). It is a manager
// Runnable: it runs on the leader, where the reconciler that feeds it runs.
type notifier struct {
	opts   ApprovalOptions
	client *http.Client
	queue  chan Notice
	now    func() time.Time
	log    logr.Logger
}

func newNotifier(opts ApprovalOptions, now func() time.Time) (*notifier, error) {
	if opts.NotifyAuthHeaderFile != "" {
		// Read once at start so that a missing or malformed Secret stops
		// the manager with a clear error rather than failing every notice.
		if _, err := readAuthHeader(opts.NotifyAuthHeaderFile); err != nil {
			return nil, err
		}
	}
	return &notifier{opts: opts, client: &http.Client{Timeout: opts.NotifyTimeout}, queue: make(chan Notice, opts.NotifyQueueSize),
		now: now, log: ctrl.Log.WithName("approval-notify")}, nil
}

// enqueue hands n to the workers, or drops it (counted and logged) when
// the queue is full.
func (n *notifier) enqueue(notice Notice) {
	select {
	case n.queue <- notice:
	default:
		approvalNotices.WithLabelValues(notifyDropped).Inc()
		n.log.Error(nil, "approval notice dropped: the queue is full (the receiver is slow or down)",
			"approvalRequest", notice.Namespace+"/"+notice.Name, "queueSize", cap(n.queue))
	}
}

// Start runs the workers until ctx ends; notices still queued are dropped
// with the process (the requests stay, with their Events).
func (n *notifier) Start(ctx context.Context) error {
	var wg sync.WaitGroup
	for range defaultNotifyWorkers {
		wg.Go(func() {
			for {
				select {
				case <-ctx.Done():
					return
				case notice := <-n.queue:
					n.deliver(ctx, notice)
				}
			}
		})
	}
	wg.Wait()
	return nil
}

// deliver POSTs notice until a 2xx answer, at most NotifyAttempts times,
// waiting NotifyBackoff and then twice as long before each retry; it gives
// up early when the next attempt would come after the request expired:
// nobody can approve it then.
func (n *notifier) deliver(ctx context.Context, notice Notice) {
	body, err := json.Marshal(notice)
	if err != nil {
		approvalNotices.WithLabelValues(notifyFailed).Inc()
		n.log.Error(err, "approval notice not encoded", "approvalRequest", notice.Namespace+"/"+notice.Name)
		return
	}
	wait := n.opts.NotifyBackoff
	for attempt := 1; ; attempt++ {
		err := n.post(ctx, body)
		if err == nil {
			approvalNotices.WithLabelValues(notifySent).Inc()
			return
		}
		last := attempt >= n.opts.NotifyAttempts || !n.now().Add(wait).Before(notice.ExpiresAt)
		n.log.Error(err, "approval notice not delivered", "approvalRequest", notice.Namespace+"/"+notice.Name,
			"attempt", attempt, "giveUp", last)
		if last || !sleepCtx(ctx, wait) {
			approvalNotices.WithLabelValues(notifyFailed).Inc()
			return
		}
		wait *= 2
	}
}

// maxErrorBody is how much of a refusal's body goes into the log.
const maxErrorBody = 512

func (n *notifier) post(ctx context.Context, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.opts.NotifyURL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "toolgate-manager")
	if n.opts.NotifyAuthHeaderFile != "" {
		auth, err := readAuthHeader(n.opts.NotifyAuthHeaderFile)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", auth)
	}
	resp, err := n.client.Do(req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return fmt.Errorf("%s answered %s: %s", n.opts.NotifyURL, resp.Status, bytes.TrimSpace(b))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<16)) // lets the connection be reused
	return nil
}

// sleepCtx waits d or until ctx ends; it reports whether d passed.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
