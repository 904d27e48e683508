package approval

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// maxConsumeAttempts bounds Consume's retries on conflicts: the loser of a
// race with another replica stops at its first re-read (consumedAt set);
// more attempts only ride out other writers of the status (the operator's
// conditions).
const maxConsumeAttempts = 10

// Consume records that the approved request name let its call through:
// status.consumedAt, written with the resourceVersion last seen, so of two
// replicas consuming one approval exactly one succeeds; the other gets
// ErrConsumed. Only an Approved request can be consumed.
func (s *Store) Consume(ctx context.Context, name string) error {
	ar := s.get(name)
	if ar == nil {
		// Not seen by the watch yet: ask the API server itself.
		var err error
		if ar, err = s.fetch(ctx, name); err != nil {
			return err
		}
	}
	for attempt := 1; ; attempt++ {
		now := s.opts.Now()
		if err := consumable(ar, now); err != nil {
			return s.describe(name, err)
		}
		used := ar.DeepCopy()
		used.TypeMeta = metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ApprovalRequest"}
		used.Status.ConsumedAt = &metav1.Time{Time: now}
		out := &v1alpha1.ApprovalRequest{}
		err := s.rc.Put().Namespace(s.namespace).Resource(resource).Name(name).SubResource("status").
			Body(used).Do(ctx).Into(out)
		switch {
		case err == nil:
			s.remember(out)
			return nil
		case apierrors.IsConflict(err) && attempt < maxConsumeAttempts:
			// Someone wrote it since: another replica's consumedAt, or a
			// condition; the re-read tells which.
			if ar, err = s.fetch(ctx, name); err != nil {
				return err
			}
		default:
			return s.describe(name, fmt.Errorf("recording its use: %w", err))
		}
	}
}

// consumable says why ar cannot let a call through at now, if it cannot.
func consumable(ar *v1alpha1.ApprovalRequest, now time.Time) error {
	switch st := StateOf(ar, now); st {
	case Approved:
		return nil
	case Consumed:
		return ErrConsumed
	default:
		return fmt.Errorf("it is %s, and only an Approved request can be used", st)
	}
}

// fetch reads name from the API server, and keeps what it read.
func (s *Store) fetch(ctx context.Context, name string) (*v1alpha1.ApprovalRequest, error) {
	ar := &v1alpha1.ApprovalRequest{}
	if err := s.rc.Get().Namespace(s.namespace).Resource(resource).Name(name).Do(ctx).Into(ar); err != nil {
		return nil, s.describe(name, err)
	}
	s.remember(ar)
	return ar, nil
}
