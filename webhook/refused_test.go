package webhook

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// The layers that refuse a malformed Policy: the CRD's schema and CEL
// rules (which hold with the webhook down), or the webhook (what needs the
// engine).
const schema, webhook = "schema", "webhook"

// refusedCase is a Policy spec the API server must refuse, the layer that
// must refuse it, and what the error must mention.
type refusedCase struct {
	name, spec, layer string
	want              []string
}

// expectRefused creates each case's Policy (named prefix-<index>) and
// checks it is refused by its layer, as Invalid or BadRequest, with every
// expected phrase.
func expectRefused(t *testing.T, prefix string, tests []refusedCase) {
	t.Helper()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := k8sClient.Create(context.Background(), newPolicy(t, fmt.Sprintf("%s-%d", prefix, i), tt.spec))
			if err == nil {
				t.Fatalf("the API server accepted it")
			}
			if !apierrors.IsInvalid(err) && !apierrors.IsBadRequest(err) {
				t.Errorf("error is not Invalid/BadRequest: %v", err)
			}
			if byWebhook := strings.Contains(err.Error(), webhookDenied); byWebhook != (tt.layer == webhook) {
				t.Errorf("refused by the webhook: %v, want the %s to refuse it:\n%v", byWebhook, tt.layer, err)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q:\n%v", w, err)
				}
			}
		})
	}
}
