package bundlesource

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/toolgate/toolgate/bundle"
)

// Chunked bundles through the API (bundle/chunks.go has the format). The
// sidecar watches only the bundle ConfigMap, which holds the index; the
// parts are read with a get each when the index changes (the sidecar's
// Role names them, webhook.SidecarRoleRules). The operator writes the parts
// before the index, so they are there when the index arrives; a part that
// is missing or does not match (a read racing the next publish, the API
// unreachable) is retried with backoff for as long as that index is the
// latest, while the last good bundle keeps serving.

// partRetryFirst and partRetryMax bound the wait between reads of a
// chunked bundle's parts that failed.
const (
	partRetryFirst = 500 * time.Millisecond
	partRetryMax   = 30 * time.Second
)

// chunkReader reads the parts of the chunked bundles one configMapSource
// sees.
type chunkReader struct {
	ctx   context.Context
	parts corev1client.ConfigMapInterface
	// latest is the resourceVersion of the bundle ConfigMap last applied
	// and retry the pending retry's timer; both guarded by the source's mu.
	latest string
	retry  *time.Timer
	wait   time.Duration
}

// loadChunked loads the chunked bundle cm indexes, and schedules a retry
// through reapply (which takes the source's mu and checks that cm is still
// the latest) when its parts could not be read or did not match. Called
// with the source's mu held.
func (c *chunkReader) loadChunked(l *Loader, cm *corev1.ConfigMap, reapply func()) error {
	if c.latest != cm.ResourceVersion {
		c.wait = 0 // a new index: its first retry comes soon
	}
	c.latest = cm.ResourceVersion
	if c.retry != nil {
		c.retry.Stop()
		c.retry = nil
	}
	err := l.LoadChunkedConfigMap(cm, c.get)
	if err == nil || !(errors.Is(err, bundle.ErrMissingPart) || errors.Is(err, bundle.ErrPartMismatch)) || c.ctx.Err() != nil {
		c.wait = 0
		return err
	}
	c.wait = min(max(2*c.wait, partRetryFirst), partRetryMax)
	c.retry = time.AfterFunc(c.wait, func() {
		if c.ctx.Err() == nil {
			reapply()
		}
	})
	return err
}

func (c *chunkReader) get(name string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(c.ctx, 30*time.Second)
	defer cancel()
	cm, err := c.parts.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	part, ok := cm.BinaryData[bundle.PartKey]
	if !ok {
		return nil, fmt.Errorf("ConfigMap %s/%s has no binaryData.%s", cm.Namespace, cm.Name, bundle.PartKey)
	}
	return part, nil
}

// LoadChunkedConfigMap loads the chunked bundle cm indexes, reading its
// parts with get: the index's signature is verified (with trusted keys),
// then each part against the index, then the document they make as any
// other (its revision must be the index's), its signature and rollback
// protection included.
func (l *Loader) LoadChunkedConfigMap(cm *corev1.ConfigMap, get func(name string) ([]byte, error)) error {
	gz, ix, err := bundle.ReadChunked(cm, l.cfg.Trust, l.cfg.Namespace, get)
	if err != nil {
		l.reject(OriginConfigMap, err)
		return err
	}
	return l.loadSealed(gz, true, sealOf(cm), OriginConfigMap, ix.Revision)
}

// sealOf is the signature and endorsements a bundle ConfigMap carries.
func sealOf(cm *corev1.ConfigMap) Seal {
	var sl Seal
	if v, ok := cm.Data[bundle.SignatureKey]; ok {
		sl.Sig = []byte(v)
	}
	if v, ok := cm.Data[bundle.EndorsementsKey]; ok {
		sl.Endorsements = []byte(v)
	}
	return sl
}
