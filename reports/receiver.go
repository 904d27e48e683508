package reports

import (
	"context"
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// receiver marks (or unmarks) the manager's own Pod with
// v1alpha1.LabelReportsReceiver: the leader marks itself once its endpoint
// listens, and every replica unmarks itself as it starts, before any
// election (a restarted former leader keeps its Pod and its label).
type receiver struct {
	client    client.Client
	namespace string
	pod       string
}

func (r receiver) mark(ctx context.Context, on bool) error {
	if r.pod == "" || r.namespace == "" {
		return nil // not in a Pod: nothing routes by the label
	}
	var value any // null deletes the label
	if on {
		value = "true"
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{v1alpha1.LabelReportsReceiver: value}}})
	if err != nil {
		return err
	}
	pod := &corev1.Pod{}
	pod.Namespace, pod.Name = r.namespace, r.pod
	return r.client.Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch))
}
