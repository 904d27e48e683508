package reports

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// Bounds of the TokenReview cache: a sidecar sends a batch at most every
// flush interval (1 s by default), and a review per batch would double the
// API requests of reporting. A token accepted is trusted for reviewTTL,
// at most: shorter than a projected token's shortest life (10 minutes).
const (
	reviewTTL        = time.Minute
	maxCachedReviews = 10_000
)

// TokenReviewer authenticates bearer tokens with the API server's
// TokenReview for the audience v1alpha1.ReportsAudience, and accepts only
// ServiceAccounts: system:serviceaccount:NS:NAME may report for NS.
type TokenReviewer struct {
	Client client.Client
	Now    func() time.Time

	mu    sync.Mutex
	cache map[[sha256.Size]byte]review
}

type review struct {
	namespace string
	until     time.Time
}

var _ Authenticator = &TokenReviewer{}

// Namespace is the namespace of the ServiceAccount token belongs to.
func (t *TokenReviewer) Namespace(r *http.Request, token string) (string, error) {
	now := time.Now
	if t.Now != nil {
		now = t.Now
	}
	sum := sha256.Sum256([]byte(token))
	t.mu.Lock()
	if c, ok := t.cache[sum]; ok && now().Before(c.until) {
		t.mu.Unlock()
		return c.namespace, nil
	}
	t.mu.Unlock()
	tr := &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token, Audiences: []string{v1alpha1.ReportsAudience}}}
	if err := t.Client.Create(r.Context(), tr); err != nil {
		return "", err
	}
	if !tr.Status.Authenticated {
		why := tr.Status.Error
		if why == "" {
			why = "the API server does not accept it"
		}
		return "", fmt.Errorf("%w: the token is not valid for the audience %s: %s", ErrUnauthenticated, v1alpha1.ReportsAudience, why)
	}
	if !slices.Contains(tr.Status.Audiences, v1alpha1.ReportsAudience) {
		return "", fmt.Errorf("%w: the token is not for the audience %s", ErrUnauthenticated, v1alpha1.ReportsAudience)
	}
	ns, err := serviceAccountNamespace(tr.Status.User.Username)
	if err != nil {
		return "", err
	}
	t.mu.Lock()
	if t.cache == nil || len(t.cache) >= maxCachedReviews {
		t.cache = map[[sha256.Size]byte]review{}
	}
	t.cache[sum] = review{namespace: ns, until: now().Add(reviewTTL)}
	t.mu.Unlock()
	return ns, nil
}

// serviceAccountNamespace reads NS from system:serviceaccount:NS:NAME.
func serviceAccountNamespace(user string) (string, error) {
	rest, ok := strings.CutPrefix(user, "system:serviceaccount:")
	ns, name, ok2 := strings.Cut(rest, ":")
	if !ok || !ok2 || name == "" || len(validation.IsDNS1123Label(ns)) > 0 {
		return "", fmt.Errorf("%w: %q is not a ServiceAccount: only sidecars' ServiceAccount tokens may report", ErrUnauthenticated, user)
	}
	return ns, nil
}
