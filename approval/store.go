package approval

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/toolgate/toolgate/api/v1alpha1"
)

// DefaultMaxPendingPerAgent is the cap of an agent's pending requests when
// StoreOptions leaves it 0 (the default).
const DefaultMaxPendingPerAgent = 20

// resource is the ApprovalRequests' plural, as the REST paths name it.
const resource = "approvalrequests"

// StoreOptions tune a Store; the zero value is the defaults.
type StoreOptions struct {
	// MaxPendingPerAgent caps an agent's pending requests: past it Ask
	// answers ErrQueueFull. 0: DefaultMaxPendingPerAgent.
	MaxPendingPerAgent int
	// Now is the clock expiries are read against (tests inject one).
	Now func() time.Time
	// Logger receives the watch's failures; nil: discarded.
	Logger *slog.Logger
}

// Store keeps the ApprovalRequests of one namespace (the sidecar's own) on
// the API server: it creates them for asked calls, answers their state from
// an informer's cache, and records their single use. It implements
// decide.Approvals. Run must be running, and HasSynced true, for Status to
// see requests made before this process started.
type Store struct {
	namespace string
	opts      StoreOptions
	rc        rest.Interface
	informer  cache.SharedIndexInformer
	log       *slog.Logger

	mu      sync.Mutex
	changed chan struct{}
	// overlay holds what this process wrote (created, consumed) until the
	// informer delivers that version or a later one: Status must see a
	// request Ask just made, and Consume's write, before the watch does.
	overlay map[string]*v1alpha1.ApprovalRequest
	// flights single-flight Ask by call key: concurrent identical calls in
	// this process share one ApprovalRequest.
	flights map[flightKey]*flight
	// creating holds the count of an agent's pending requests and the
	// create that follows together (a semaphore of one that Ask can leave
	// when its ctx ends).
	creating chan struct{}
}

// flightKey is what makes two Asks identical: the call bound, and what its
// request shows.
type flightKey struct {
	key string
	shown
}

// flight is one Ask in progress for a key; done is closed when ticket and
// err are set.
type flight struct {
	done   chan struct{}
	ticket Ticket
	err    error
}

// Index names of the informer's cache: the two labels Ask looks up by.
const (
	indexKey   = "key"
	indexAgent = "agent"
)

// NewStore makes the Store of the ApprovalRequests in namespace, reached
// with cfg (the sidecar's own identity). It does not contact the API
// server: Run starts the watch.
func NewStore(cfg *rest.Config, namespace string, opts StoreOptions) (*Store, error) {
	if cfg == nil {
		return nil, errors.New("approval store: no API server configuration")
	}
	if namespace == "" {
		return nil, errors.New("approval store: no namespace")
	}
	if opts.MaxPendingPerAgent < 0 {
		return nil, fmt.Errorf("approval store: MaxPendingPerAgent %d is negative", opts.MaxPendingPerAgent)
	}
	if opts.MaxPendingPerAgent == 0 {
		opts.MaxPendingPerAgent = DefaultMaxPendingPerAgent
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	rc, err := restClient(cfg)
	if err != nil {
		return nil, fmt.Errorf("approval store: %s client: %w", resource, err)
	}
	s := &Store{
		namespace: namespace,
		opts:      opts,
		rc:        rc,
		log:       opts.Logger,
		changed:   make(chan struct{}),
		overlay:   map[string]*v1alpha1.ApprovalRequest{},
		flights:   map[flightKey]*flight{},
		creating:  make(chan struct{}, 1),
	}
	lw := cache.NewFilteredListWatchFromClient(rc, resource, namespace, func(*metav1.ListOptions) {})
	s.informer = cache.NewSharedIndexInformerWithOptions(lw, &v1alpha1.ApprovalRequest{}, cache.SharedIndexInformerOptions{
		Indexers: cache.Indexers{indexKey: labelIndex(v1alpha1.LabelApprovalKey), indexAgent: queueIndex},
	})
	_ = s.informer.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		s.log.Error("watching ApprovalRequests failed; retrying with backoff", "namespace", namespace, "err", err)
	})
	if _, err := s.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.seen(obj, false) },
		UpdateFunc: func(_, obj any) { s.seen(obj, false) },
		DeleteFunc: func(obj any) { s.seen(obj, true) },
	}); err != nil {
		return nil, fmt.Errorf("approval store: %w", err)
	}
	return s, nil
}

// restClient is a client of toolgate.dev/v1alpha1 resources; custom
// resources are served as JSON only.
func restClient(config *rest.Config) (*rest.RESTClient, error) {
	sch := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(sch); err != nil {
		return nil, err
	}
	cfg := rest.CopyConfig(config)
	cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
	// client-go's default of 5 writes/s (burst 10) queued every create and
	// use past a few asked calls a second, about 200 ms each (make
	// measure-approvals back to back); a sidecar's writes are one request
	// and one use per asked call, bounded by --approvals-max-pending.
	cfg.QPS, cfg.Burst = 50, 100
	cfg.GroupVersion = &v1alpha1.GroupVersion
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(sch).WithoutConversion()
	return rest.RESTClientFor(cfg)
}

// queueOf is the queue of pending requests ar counts in: the
// ServiceAccount that asked (the approvals admission policy makes a
// ServiceAccount name itself there) and the agent, both read from the
// spec. Not from the agent label: anyone who may create requests in the
// namespace could write that, and fill another agent's queue.
func queueOf(ar *v1alpha1.ApprovalRequest) string {
	return AgentKey(ar.Spec.ServiceAccount + "\x00" + ar.Spec.AgentID)
}

func queueIndex(obj any) ([]string, error) {
	if ar, ok := obj.(*v1alpha1.ApprovalRequest); ok {
		return []string{queueOf(ar)}, nil
	}
	return nil, nil
}

// labelIndex indexes ApprovalRequests by the value of one label.
func labelIndex(label string) cache.IndexFunc {
	return func(obj any) ([]string, error) {
		ar, ok := obj.(*v1alpha1.ApprovalRequest)
		if !ok {
			return nil, nil
		}
		if v, ok := ar.Labels[label]; ok {
			return []string{v}, nil
		}
		return nil, nil
	}
}

// Run watches the namespace's ApprovalRequests until ctx ends.
func (s *Store) Run(ctx context.Context) {
	s.log.Info("watching ApprovalRequests", "namespace", s.namespace)
	s.informer.RunWithContext(ctx)
}

// HasSynced tells whether the first list of ApprovalRequests is in the
// cache.
func (s *Store) HasSynced() bool { return s.informer.HasSynced() }

// Changed is closed at the next add, update or delete of an ApprovalRequest
// the watch delivers.
func (s *Store) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.changed
}

// seen is the informer's event: the overlay drops what the watch has
// caught up with, and every waiter on Changed wakes.
func (s *Store) seen(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ar, ok := obj.(*v1alpha1.ApprovalRequest); ok {
		if own, ok := s.overlay[ar.Name]; ok && (deleted || !newer(own, ar)) {
			delete(s.overlay, ar.Name)
		}
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// newer tells whether a is a later version of its object than b. Resource
// versions are compared as the API defines them (integers); when one is
// not well formed, a differing a counts as newer, so the overlay keeps its
// own write until the watch delivers exactly that version.
func newer(a, b *v1alpha1.ApprovalRequest) bool {
	if b == nil {
		return true
	}
	c, err := resourceversion.CompareResourceVersion(a.ResourceVersion, b.ResourceVersion)
	if err != nil {
		return a.ResourceVersion != b.ResourceVersion
	}
	return c > 0
}

// remember puts what this process wrote into the overlay, unless the cache
// already holds it or a later version.
func (s *Store) remember(ar *v1alpha1.ApprovalRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if newer(ar, s.cached(ar.Name)) {
		if own, ok := s.overlay[ar.Name]; !ok || newer(ar, own) {
			s.overlay[ar.Name] = ar
		}
	}
}

// cached is the informer's copy of name, nil when it has none. Never
// modify it.
func (s *Store) cached(name string) *v1alpha1.ApprovalRequest {
	obj, ok, err := s.informer.GetStore().GetByKey(s.namespace + "/" + name)
	if err != nil || !ok {
		return nil
	}
	ar, _ := obj.(*v1alpha1.ApprovalRequest)
	return ar
}

// get is the latest version of name this process knows: the cache's or
// its own write's. Never modify it.
func (s *Store) get(name string) *v1alpha1.ApprovalRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.getLocked(name)
}

func (s *Store) getLocked(name string) *v1alpha1.ApprovalRequest {
	c := s.cached(name)
	if own, ok := s.overlay[name]; ok && newer(own, c) {
		return own
	}
	return c
}

// byLabel is every ApprovalRequest the cache or the overlay indexes under
// value in index, each at its latest version.
func (s *Store) byLabel(index, label, value string) []*v1alpha1.ApprovalRequest {
	return s.byIndex(index, value, func(ar *v1alpha1.ApprovalRequest) string { return ar.Labels[label] })
}

// byIndex is every ApprovalRequest the cache or the overlay indexes under
// value in index (of computes an object's value), each at its latest
// version.
func (s *Store) byIndex(index, value string, of func(*v1alpha1.ApprovalRequest) string) []*v1alpha1.ApprovalRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	names := map[string]bool{}
	objs, _ := s.informer.GetIndexer().ByIndex(index, value)
	for _, o := range objs {
		if ar, ok := o.(*v1alpha1.ApprovalRequest); ok {
			names[ar.Name] = true
		}
	}
	for name, ar := range s.overlay {
		if of(ar) == value {
			names[name] = true
		}
	}
	out := make([]*v1alpha1.ApprovalRequest, 0, len(names))
	for name := range names {
		if ar := s.getLocked(name); ar != nil && of(ar) == value {
			out = append(out, ar)
		}
	}
	return out
}

// describe wraps err with the request it is about.
func (s *Store) describe(name string, err error) error {
	return fmt.Errorf("ApprovalRequest %s/%s: %w", s.namespace, name, err)
}
