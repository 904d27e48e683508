package reports

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// FieldOwner is the field manager of the reports' server-side applies.
const FieldOwner = "toolgate-reports"

// DefaultInterval is how often the writer looks for reports whose content
// changed: a report is a summary over an hour, and each write is one
// object of up to a few hundred kilobytes.
const DefaultInterval = 30 * time.Second

// Writer keeps one report per namespace the aggregator counts, written
// (server-side apply) only when its content changed.
type Writer struct {
	Client client.Client
	Agg    *Aggregator
	Format string
	Window time.Duration

	written map[string][sha256.Size]byte // what was last applied, by namespace
}

// Flush writes every report whose content changed since it was last
// written, the window moved to now; a namespace whose counts all left the
// window gets an empty report once. It returns the errors of the writes
// that failed, which the next Flush tries again.
func (w *Writer) Flush(ctx context.Context) error {
	w.Agg.Expire()
	if w.written == nil {
		w.written = map[string][sha256.Size]byte{}
	}
	todo := w.Agg.Namespaces()
	for ns := range w.written {
		todo = append(todo, ns)
	}
	var errs []error
	seen := map[string]bool{}
	for _, ns := range todo {
		if seen[ns] {
			continue
		}
		seen[ns] = true
		results := w.Agg.Results(ns)
		u := Build(w.Format, ns, results, w.Window)
		sum, err := contentSum(u.Object)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if old, ok := w.written[ns]; ok && old == sum {
			continue
		}
		err = w.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership)
		switch {
		case apierrors.IsNotFound(err): // the namespace is gone
			delete(w.written, ns)
		case err != nil:
			errs = append(errs, err)
		case len(results) == 0:
			delete(w.written, ns) // written empty: nothing left to follow
		default:
			w.written[ns] = sum
		}
	}
	return errors.Join(errs...)
}

// contentSum covers what a report says (its results and summary), not the
// metadata the API server fills.
func contentSum(obj map[string]any) ([sha256.Size]byte, error) {
	b, err := json.Marshal([]any{obj["results"], obj["summary"]})
	if err != nil {
		return [sha256.Size]byte{}, err
	}
	return sha256.Sum256(b), nil
}
