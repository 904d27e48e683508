package bundlesource

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	authenticationv1client "k8s.io/client-go/kubernetes/typed/authentication/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
)

// The ServiceAccount a sidecar runs as decides who it is in a namespace
// that registers its agents (the bundle's Agent for it) and which
// FrozenAgents naming a ServiceAccount stop it. With the ConfigMap source
// it is what the API server says the sidecar's own credentials are
// (SelfSubjectReview), never an argument: an argument is whatever the
// Pod's author (or a namespace editor writing the sidecar by hand) chose.

// serviceAccountPrefix starts the user name of a ServiceAccount's token.
const serviceAccountPrefix = "system:serviceaccount:"

// ServiceAccountFromUser reads a user name as the API server writes a
// ServiceAccount's ("system:serviceaccount:NAMESPACE:NAME"); false for any
// other user.
func ServiceAccountFromUser(user string) (namespace, name string, ok bool) {
	rest, found := strings.CutPrefix(user, serviceAccountPrefix)
	if !found {
		return "", "", false
	}
	namespace, name, found = strings.Cut(rest, ":")
	if !found || namespace == "" || name == "" || strings.Contains(name, ":") {
		return "", "", false
	}
	return namespace, name, true
}

// initServiceAccount is where a sidecar watching its bundle through the
// API starts: the ServiceAccount the API server last said it runs as
// (kept in the sidecar's own cache volume, which the agent cannot write),
// or none until it says so. A sidecar restarted while the API server is
// unreachable keeps its identity; one that never reached it has none, and
// is AGENT_UNREGISTERED wherever agents are registered.
func (l *Loader) initServiceAccount() {
	l.flagServiceAccount = l.d.Config().ServiceAccount
	sa := ""
	if l.cache != nil {
		data, err := os.ReadFile(l.cache.serviceAccountPath())
		switch {
		case err == nil:
			sa = strings.TrimSpace(string(data))
		case !errors.Is(err, fs.ErrNotExist):
			l.log.Error("reading the cached ServiceAccount; none until the API server says", "err", err)
		}
	}
	l.d.SetServiceAccount(sa)
}

// learnServiceAccount asks the API server who the sidecar's credentials
// are, retrying with backoff until it answers or ctx ends, and binds the
// answer.
func (l *Loader) learnServiceAccount(ctx context.Context, cfg *rest.Config, namespace string) {
	client, err := authenticationv1client.NewForConfig(cfg)
	if err != nil {
		l.log.Error("SelfSubjectReview client; the sidecar's ServiceAccount stays unknown", "err", err)
		return
	}
	backoff := workqueue.NewTypedItemExponentialFailureRateLimiter[string](200*time.Millisecond, 30*time.Second)
	for {
		review, err := client.SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err == nil {
			l.bindServiceAccount(review.Status.UserInfo.Username, namespace)
			return
		}
		l.log.Error("asking the API server which ServiceAccount this sidecar runs as (SelfSubjectReview); retrying", "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff.When("ssr")):
		}
	}
}

// bindServiceAccount binds the ServiceAccount of user. A ServiceAccount of
// another namespace is none at all; a user that is no ServiceAccount (a
// sidecar run outside a Pod, with a kubeconfig) keeps --service-account.
func (l *Loader) bindServiceAccount(user, namespace string) {
	ns, name, ok := ServiceAccountFromUser(user)
	sa := ""
	switch {
	case !ok:
		sa = l.flagServiceAccount
		l.log.Info("the sidecar's credentials are no ServiceAccount's; --service-account stands", "user", user, "serviceAccount", sa)
	case ns != namespace:
		l.log.Error("the sidecar's credentials are a ServiceAccount of another namespace: no identity", "user", user, "namespace", namespace)
	default:
		sa = name
		if l.flagServiceAccount != "" && l.flagServiceAccount != sa {
			l.log.Warn("--service-account differs from what the API server says; the API server's stands", "flag", l.flagServiceAccount, "serviceAccount", sa)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.d.SetServiceAccount(sa)
	l.log.Info("runs as", "serviceAccount", sa)
	if l.cache != nil {
		if err := l.cache.write(l.cache.serviceAccountPath(), []byte(sa+"\n")); err != nil {
			l.log.Error("caching the ServiceAccount", "err", err)
		}
	}
	if l.cfg.OnFreezesChanged != nil {
		// What the agent may see (its tool lists) depends on who it is.
		l.cfg.OnFreezesChanged()
	}
}
