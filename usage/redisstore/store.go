package redisstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"
	"github.com/redis/go-redis/v9/maintnotifications"

	"github.com/toolgate/toolgate/engine"
	"github.com/toolgate/toolgate/usage"
)

// poolSize is the most connections a sidecar opens: one per decision in
// flight under a shared limit, which the sidecar's few cores bound well
// below this.
const poolSize = 16

// callSlack is how many entries past max a rate limit's counter keeps
// (see keepCalls).
const callSlack = 1024

// maxKeep caps what a counter keeps at a number Lua's doubles hold exactly.
const maxKeep = 1 << 52

// tokenBuckets is how many time buckets split a token budget's window.
const tokenBuckets = 64

// Store counts shared limits in one Redis server. It is safe for
// concurrent use.
type Store struct {
	c       *redis.Client
	addr    string
	timeout time.Duration
	prefix  string // toolgate:{cluster/namespace}:
	// ids names reservations: a random prefix per Store (80 bits, so that
	// two sidecars never pick the same) and a counter, rather than a
	// random id per call, which cost a getrandom system call on every
	// limited call (measured in make measure-limits).
	idPrefix string
	ids      atomic.Uint64
	// fast makes Reserve's and Release's round trips (conn.go).
	fast *fastPool
}

var _ usage.SharedStore = (*Store)(nil)

// quiet silences the client's own log lines (a failed dial, on every call
// while the server is down, would flood the sidecar's log): what failed is
// in the errors returned, which the sidecar counts and reports.
var quiet sync.Once

// Open connects to the server c names, authenticates, selects the DB and
// loads the scripts, within c.Timeout each. A configuration error (the
// URL, the files, the names), a refused password or a DB index the server
// does not have is a plain error; a server that cannot be reached or does
// not answer in time wraps usage.ErrUnavailable, so a caller may start
// not-ready and retry.
func Open(ctx context.Context, c Config) (*Store, error) {
	s, e, err := newStore(c)
	if err != nil {
		return nil, err
	}
	if err := s.open(ctx, e.db); err != nil {
		_ = s.c.Close()
		return nil, err
	}
	return s, nil
}

// New is a Store that has not yet reached its server, for a sidecar that
// starts while the server is unreachable (Open failed with
// usage.ErrUnavailable): every operation dials anew until it answers,
// Reserve loads its scripts when the server lacks them, and a wrong
// password then shows in Check's error. Only the configuration is checked.
func New(c Config) (*Store, error) {
	s, _, err := newStore(c)
	return s, err
}

func newStore(c Config) (*Store, endpoint, error) {
	e, pw, tc, err := c.validate()
	if err != nil {
		return nil, e, err
	}
	quiet.Do(func() { redis.SetLogger(&logging.VoidLogger{}) })
	fast := newFastPool(e, pw, tc, c.Timeout)
	s := &Store{addr: e.addr, timeout: c.Timeout, prefix: "toolgate:{" + c.Cluster + "/" + c.Namespace + "}:", idPrefix: rand.Text()[:16] + ".", fast: fast}
	s.c = redis.NewClient(&redis.Options{
		Addr:      e.addr,
		Username:  e.username,
		Password:  pw,
		DB:        e.db,
		TLSConfig: tc,
		// RESP2: every Redis 6/7 and Valkey speaks it; nothing here needs
		// RESP3's push messages.
		Protocol:        2,
		DisableIdentity: true,
		MaintNotificationsConfig: &maintnotifications.Config{
			Mode: maintnotifications.ModeDisabled,
		},
		// One attempt per operation, bounded by the timeout everywhere: a
		// retry could only make a decision wait past it.
		MaxRetries:            -1,
		DialerRetries:         1,
		DialTimeout:           c.Timeout,
		ReadTimeout:           c.Timeout,
		WriteTimeout:          c.Timeout,
		PoolTimeout:           c.Timeout,
		ContextTimeoutEnabled: true,
		PoolSize:              poolSize,
		MinIdleConns:          1,
	})
	return s, e, nil
}

// open pings (which dials, authenticates and selects) and loads the
// scripts, telling a refused password or DB index apart.
func (s *Store) open(ctx context.Context, db int) error {
	op, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err := s.c.Ping(op).Err()
	if err == nil {
		if err = reserveLua.Load(op, s.c).Err(); err == nil {
			err = releaseLua.Load(op, s.c).Err()
		}
		if err != nil && strings.HasPrefix(err.Error(), "NOPERM") {
			// An ACL user with only what the docs ask (+eval +evalsha
			// +ping): the first call sends each script with EVAL.
			err = nil
		}
	}
	if err == nil {
		return nil
	}
	msg := err.Error()
	switch {
	case isAuthError(msg):
		return fmt.Errorf("redis %s: authentication failed (%s): check --usage-store-password-file and the URL's user", s.addr, firstLine(msg))
	case strings.Contains(msg, "DB index is out of range"):
		return fmt.Errorf("redis %s: DB index %d is out of range on this server%s", s.addr, db, s.databases())
	}
	return s.fail(ctx, "connecting", err)
}

// databases is " (databases=N)", the server's setting, when it tells.
func (s *Store) databases() string {
	o := *s.c.Options()
	o.DB, o.PoolSize, o.MinIdleConns = 0, 1, 0
	c := redis.NewClient(&o)
	defer func() { _ = c.Close() }()
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	v, err := c.ConfigGet(ctx, "databases").Result()
	if err != nil || v["databases"] == "" {
		return ""
	}
	return " (databases=" + v["databases"] + ")"
}

// handle is what one Reserve added: Release's arguments.
type handle struct {
	keys []string
	args []any // id, then kind, field, tokens per key
}

// Reserve counts the call in every counter at once and returns what each
// held before it. at is not used: the time is the Redis server's, one
// clock for every sidecar sharing the counters.
func (s *Store) Reserve(ctx context.Context, _ time.Time, counters []engine.SharedQuery) (usage.Reservation, error) {
	r := usage.Reservation{Used: make([]float64, len(counters))}
	if len(counters) == 0 {
		return r, nil
	}
	id := s.idPrefix + strconv.FormatUint(s.ids.Add(1), 36)
	// The same counter asked twice is counted once. A call reads a few
	// counters: a linear search costs less than a map.
	index := make([]int, len(counters))
	keys := make([]string, 0, len(counters))
	args := make([]any, 1, 1+4*len(counters))
	args[0] = id
	for i, q := range counters {
		k := s.key(q)
		j := slices.Index(keys, k)
		if j < 0 {
			a, err := queryArgs(q)
			if err != nil {
				return usage.Reservation{}, &unavailable{msg: "redis " + s.addr + ": " + err.Error()}
			}
			j = len(keys)
			keys = append(keys, k)
			args = append(args, a...)
		}
		index[i] = j
	}
	op, cancel := s.bound(ctx)
	defer cancel()
	reply, err := s.fast.run(op, &reserveRaw, keys, args)
	if err != nil {
		return usage.Reservation{}, s.fail(ctx, "reserve", err)
	}
	out, ok := strings2(reply)
	if !ok {
		return usage.Reservation{}, &unavailable{msg: fmt.Sprintf("redis %s: reserve: script error: a reply of %T, want strings", s.addr, reply)}
	}
	if len(out) != 2*len(keys) {
		return usage.Reservation{}, &unavailable{msg: fmt.Sprintf("redis %s: reserve: script error: %d values for %d counters", s.addr, len(out), len(keys))}
	}
	h := &handle{keys: keys, args: []any{id}}
	for j := range keys {
		kind, tokens := args[1+4*j], args[4+4*j]
		h.args = append(h.args, kind, out[2*j+1], tokens)
	}
	for i, j := range index {
		v, err := strconv.ParseFloat(out[2*j], 64)
		if err != nil {
			return usage.Reservation{}, &unavailable{msg: fmt.Sprintf("redis %s: reserve: script error: count %q", s.addr, out[2*j])}
		}
		r.Used[i] = v
	}
	r.Handle = h
	return r, nil
}

// queryArgs are the script's four arguments for q's counter.
func queryArgs(q engine.SharedQuery) ([]any, error) {
	if q.Window <= 0 {
		return nil, fmt.Errorf("limit %s: window %s is not positive", q.Limit, q.Window)
	}
	window := int64((q.Window + time.Microsecond - 1) / time.Microsecond)
	if !q.Tokens {
		return []any{"c", window, keepCalls(q.Max), "0"}, nil
	}
	width := (window + tokenBuckets - 1) / tokenBuckets
	add := "0"
	if q.Add > 0 {
		add = strconv.FormatFloat(q.Add, 'g', -1, 64)
	}
	return []any{"t", window, width, add}, nil
}

// keepCalls is how many of a rate limit's newest calls its counter keeps.
// A limit only asks whether the count reached max, so max entries would
// answer it exactly, were they final; but a reservation may still be
// given back (Release) after older entries were dropped, and each one
// given back lowers the count by one. Keeping callSlack more entries keeps
// the answer exact while fewer than callSlack reservations of that counter
// are outstanding at once (each lasts one decision), and bounds the
// memory of a limit whose calls keep being allowed past max (a warn rule).
func keepCalls(limit int64) int64 {
	if limit < 0 {
		limit = 0
	}
	if limit > maxKeep-callSlack {
		return maxKeep
	}
	return limit + callSlack
}

// Release takes back what r added. A reservation without a handle (no
// counters) is nothing to take back.
func (s *Store) Release(ctx context.Context, r usage.Reservation) error {
	if r.Handle == nil {
		return nil
	}
	h, ok := r.Handle.(*handle)
	if !ok {
		return &unavailable{msg: fmt.Sprintf("redis %s: release: a reservation of another store (%T)", s.addr, r.Handle)}
	}
	op, cancel := s.bound(ctx)
	defer cancel()
	if _, err := s.fast.run(op, &releaseRaw, h.keys, h.args); err != nil {
		return s.fail(ctx, "release", err)
	}
	return nil
}

// bound is ctx, ending within the store's timeout: ctx itself when its
// deadline already comes no later (the decision core's own, from the same
// --usage-store-timeout), so that a limited call arms one timer, not two.
func (s *Store) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) <= s.timeout {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, s.timeout)
}

// Check pings the server within the timeout.
func (s *Store) Check(ctx context.Context) error {
	op, cancel := s.bound(ctx)
	defer cancel()
	if err := s.c.Ping(op).Err(); err != nil {
		return s.fail(ctx, "ping", err)
	}
	return nil
}

// Addr is the server's host:port, for logs.
func (s *Store) Addr() string { return s.addr }

// Close closes the connections.
func (s *Store) Close() error {
	s.fast.close()
	return s.c.Close()
}

// strings2 is an array reply of strings as a []string.
func strings2(reply any) ([]string, bool) {
	a, ok := reply.([]any)
	if !ok {
		return nil, false
	}
	out := make([]string, len(a))
	for i, v := range a {
		if out[i], ok = v.(string); !ok {
			return nil, false
		}
	}
	return out, true
}

// key names q's counter:
// toolgate:{cluster/namespace}:<limit id>:<scope>:<id hash>[:<tool hash>].
// The hash tag keeps one namespace's counters in one Redis Cluster slot,
// so one script may touch them all; ids and tools are hashed so that
// whatever an agent names itself cannot shape the key.
func (s *Store) key(q engine.SharedQuery) string {
	scope := engine.PerAgent
	switch {
	case q.Key.Namespace:
		scope = engine.PerNamespace
	case q.Key.Session:
		scope = engine.PerSession
	}
	k := s.prefix + q.Limit + ":" + scope + ":" + hashPrefix(q.Key.ID)
	if !q.Tokens {
		k += ":" + hashPrefix(q.Tool)
	}
	return k
}

// hashPrefix is the first 128 bits of s's SHA-256, in hex.
func hashPrefix(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}
