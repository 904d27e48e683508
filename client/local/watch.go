package local

import (
	"context"
	"time"
)

// Watch reloads the bundle every interval until ctx ends, so edits to the
// bundle file or manifest directory (or a mounted ConfigMap volume's
// bundle.json, as kubelet updates it) take effect without a restart. A
// reload that fails keeps the last good bundle and is passed to onError
// when it is not nil. Unchanged content is not recompiled. Polling, not
// file system events: it sees files behind symlinks swapped the way
// kubelet swaps them, and a bundle changes rarely.
func (l *Evaluator) Watch(ctx context.Context, interval time.Duration, onError func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := l.Reload(); err != nil && onError != nil {
				onError(err)
			}
		}
	}
}
