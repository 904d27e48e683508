// Package sidecarlease writes a sidecar's Lease: the coordination.k8s.io/v1
// Lease named after its Pod in which it reports what it serves (the bundle
// revision, the freezes it applies, the bundle it refused) for the operator
// to read into the Enforced condition. The vocabulary (label, annotations,
// report codec, renewal period) is api/v1alpha1's (sidecar_lease.go).
//
// The Lease is a report, never an input: a write that fails is logged and
// counted, and changes no decision and no probe.
package sidecarlease

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/ptr"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// Results of a write, the label of the writes counter.
const (
	ResultCreated = "created"
	ResultUpdated = "updated"
	ResultError   = "error"
)

// writeTimeout bounds one write (a Get, a Create or an Update and their
// retries): a slow API server must not hold up the next renewal.
const writeTimeout = 10 * time.Second

// minRetry is the first wait after a failed write; it doubles up to the
// renewal period.
const minRetry = time.Second

// Pod is the Pod whose sidecar writes the Lease: the Lease is named after
// it, lives in its namespace and is owned by it (so it goes with it).
type Pod struct {
	Namespace, Name string
	UID             types.UID
}

// Config is what a Writer needs besides its client.
type Config struct {
	Pod Pod
	// Report is what the sidecar serves now; called from the writer's
	// goroutine for every write.
	Report func() v1alpha1.SidecarReport
	// Written, when set, is told the result of every write (ResultCreated,
	// ResultUpdated, ResultError): the sidecar counts them in
	// toolgate_sidecar_lease_writes_total{result}.
	Written func(result string)
	Log     *slog.Logger
	// Renew is the renewal period; v1alpha1.SidecarLeaseRenewSeconds when
	// zero. Now is the clock renewals are stamped with (time.Now when nil).
	Renew time.Duration
	Now   func() time.Time
}

// Writer keeps one Lease up to date: it writes at Run's start, at once
// after Changed, and every renewal period.
type Writer struct {
	cfg    Config
	leases coordinationv1client.LeaseInterface
	wake   chan struct{}
	// last is the Lease as last written (nil before the first write or
	// after a failure): an Update starts from it, so a renewal is one
	// request, not a Get and an Update.
	last *coordinationv1.Lease
}

// New makes a writer of cfg.Pod's Lease; Run gives it its client.
// Changed may be called before Run.
func New(cfg Config) *Writer {
	if cfg.Renew <= 0 {
		cfg.Renew = v1alpha1.SidecarLeaseRenewSeconds * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Written == nil {
		cfg.Written = func(string) {}
	}
	return &Writer{cfg: cfg, wake: make(chan struct{}, 1)}
}

// Changed asks for a write as soon as the writer is free: what the
// sidecar serves changed. It never blocks (the bundle loader calls it with
// its lock held), and changes that come while a write is pending fold
// into that write.
func (w *Writer) Changed() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// Run writes the Lease through leases (a client of the Pod's namespace's)
// until ctx ends: at once, after each Changed, and every renewal period;
// after a failure, again within a second, then backing off up to the
// renewal period.
func (w *Writer) Run(ctx context.Context, leases coordinationv1client.LeasesGetter) {
	w.leases = leases.Leases(w.cfg.Pod.Namespace)
	timer := time.NewTimer(0)
	defer timer.Stop()
	var retry time.Duration
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.wake:
			if retry > 0 {
				continue // backing off: the retry writes what serves then
			}
		case <-timer.C:
		}
		next := w.cfg.Renew
		if err := w.writeOnce(ctx); err != nil {
			retry = min(max(2*retry, minRetry), w.cfg.Renew)
			next = retry
			if ctx.Err() == nil {
				w.cfg.Log.Warn("writing the sidecar Lease failed; decisions are not affected, and the operator counts this sidecar unreporting until a write succeeds",
					"lease", w.cfg.Pod.Namespace+"/"+w.cfg.Pod.Name, "retryIn", next, "err", err)
			}
		} else {
			retry = 0
		}
		timer.Reset(next)
	}
}

// writeOnce writes the Lease once with the current report: an Update of the
// Lease last written, a Get and an Update when that one is stale, a
// Create when there is none. Only Run's goroutine calls it.
func (w *Writer) writeOnce(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	report := w.cfg.Report()
	result, err := w.write(ctx, report)
	if err != nil {
		w.last = nil
		result = ResultError
	}
	w.cfg.Written(result)
	return err
}

func (w *Writer) write(ctx context.Context, report v1alpha1.SidecarReport) (string, error) {
	for attempt := 0; ; attempt++ {
		cur := w.last
		if cur == nil {
			got, err := w.leases.Get(ctx, w.cfg.Pod.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				created, err := w.leases.Create(ctx, w.lease(&coordinationv1.Lease{}, report), metav1.CreateOptions{})
				if err == nil {
					w.last = created
					return ResultCreated, nil
				}
				if !apierrors.IsAlreadyExists(err) || attempt >= 2 {
					return "", fmt.Errorf("creating Lease %s/%s: %w", w.cfg.Pod.Namespace, w.cfg.Pod.Name, err)
				}
				continue // created meanwhile (a restarted sidecar's twin): update it
			case err != nil:
				return "", fmt.Errorf("reading Lease %s/%s: %w", w.cfg.Pod.Namespace, w.cfg.Pod.Name, err)
			}
			cur = got
		}
		updated, err := w.leases.Update(ctx, w.lease(cur.DeepCopy(), report), metav1.UpdateOptions{})
		if err == nil {
			w.last = updated
			return ResultUpdated, nil
		}
		w.last = nil
		if (!apierrors.IsConflict(err) && !apierrors.IsNotFound(err)) || attempt >= 2 {
			return "", fmt.Errorf("updating Lease %s/%s: %w", w.cfg.Pod.Namespace, w.cfg.Pod.Name, err)
		}
		// Someone else wrote it (or it was deleted): read it again.
	}
}

// ourAnnotations are every annotation a report may write: an update
// removes those the new report leaves out (a refusal resolved).
var ourAnnotations = []string{
	v1alpha1.AnnotationLeaseRevision, v1alpha1.AnnotationLeaseFreezeDigest,
	v1alpha1.AnnotationLeaseFrozen, v1alpha1.AnnotationLeaseFrozenTruncated,
	v1alpha1.AnnotationLeaseRefusedRevision, v1alpha1.AnnotationLeaseRefusedReason,
	v1alpha1.AnnotationLeaseVersion,
}

// lease fills l (the Lease read, or an empty one to create) as the shared
// design says: named after the Pod, labelled, owned by the Pod, held by
// it, renewed now, annotated with report. Labels and annotations of
// others are kept.
func (w *Writer) lease(l *coordinationv1.Lease, report v1alpha1.SidecarReport) *coordinationv1.Lease {
	p := w.cfg.Pod
	l.Name, l.Namespace = p.Name, p.Namespace
	if l.Labels == nil {
		l.Labels = map[string]string{}
	}
	l.Labels[v1alpha1.LabelSidecar] = "true"
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	for _, k := range ourAnnotations {
		delete(l.Annotations, k)
	}
	for k, v := range report.Annotations() {
		l.Annotations[k] = v
	}
	l.OwnerReferences = []metav1.OwnerReference{PodOwner(p)}
	now := metav1.NewMicroTime(w.cfg.Now())
	l.Spec.HolderIdentity = ptr.To(p.Name)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(v1alpha1.SidecarLeaseDurationSeconds))
	l.Spec.RenewTime = &now
	if l.Spec.AcquireTime == nil {
		l.Spec.AcquireTime = &now
	}
	return l
}

// PodOwner is the Lease's owner reference to its Pod: the garbage
// collector deletes the Lease with the Pod. Not a controller reference:
// nothing else claims the Lease.
func PodOwner(p Pod) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID}
}

// CheckPod checks the flags that name the sidecar's Pod (--lease-pod and
// --lease-pod-uid): both or neither, a Pod name, and a UID as the API
// server writes one (a UUID, 36 characters). Both empty is no Lease.
func CheckPod(name, uid string) error {
	switch {
	case name == "" && uid == "":
		return nil
	case name == "":
		return errors.New("--lease-pod-uid needs --lease-pod (the Pod's name, from the downward API metadata.name): give both or neither")
	case uid == "":
		return errors.New("--lease-pod needs --lease-pod-uid (the Pod's UID, from the downward API metadata.uid): give both or neither")
	}
	var errs []error
	if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("--lease-pod %q is not a Pod name: %s", name, strings.Join(msgs, "; ")))
	}
	if !isUUID(uid) {
		errs = append(errs, fmt.Errorf("--lease-pod-uid %q is not a Pod UID: want 36 characters, hexadecimal digits in groups of 8-4-4-4-12 separated by '-'", uid))
	}
	return errors.Join(errs...)
}

func isUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i, c := range s {
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
	}
	return true
}
