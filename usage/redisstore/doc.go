// Package redisstore is the shared usage store (usage.SharedStore) on
// Redis (Redis 6 or 7, or Valkey; RESP2): the counts of limits with
// store: shared, one count across every sidecar of a namespace.
//
// # One round trip per limited call
//
// Reserve runs one server-side script (EVALSHA, falling back to EVAL once
// when the server has lost it, as after a restart) over every counter the
// call may read: atomically, it reads what each counter's window held,
// adds the call, and returns the counts from before it. Release, for a
// call not allowed after all, runs a second script that removes exactly
// what the reservation added, by its id. Check is a PING.
//
// Reserve and Release speak RESP2 on connections of their own (conn.go),
// made for that one exchange; go-redis connects at Open, loads the
// scripts and runs Check.
//
// # Time
//
// Counters are timed by the Redis server's clock (TIME, in microseconds),
// not the sidecars': every replica reads and writes the same timeline, so
// clock skew between nodes cannot widen or shrink a window. The window is
// trailing, (now-window, now], as the local ledger's (package usage).
//
// # Counters
//
// Keys are toolgate:{CLUSTER/NAMESPACE}:LIMIT:SCOPE:ID-HASH[:TOOL-HASH],
// LIMIT being engine.LimitID, SCOPE agent, session or namespace, and the
// hashes 128-bit SHA-256 prefixes of the agent or session id and of the
// tool. The hash tag {CLUSTER/NAMESPACE} keeps a namespace's counters in
// one Redis Cluster slot, so the script may touch them all at once. Each
// write sets the key's expiry to the window (PEXPIRE, rounded up to a
// millisecond): every entry is at or before the write's time, so none is
// in the window any more when the key expires.
//
//   - A rate limit's counter is a sorted set of the calls allowed (and
//     reserved), scored by time, one member per reservation id. Reserve
//     drops entries at or before now-window and keeps the newest max+1024
//     (a limit asks only whether the count reached max: see keepCalls), so
//     its memory is bounded by the limit, not by the traffic. Its count is
//     exact.
//   - A token budget's counter is a hash of 64 time buckets per window
//     (field "WIDTH:INDEX", tokens summed with HINCRBYFLOAT). Reserve sums
//     every bucket that ends after now-window: the oldest one may hold
//     tokens just older than the window, so a budget may over-count by at
//     most the tokens of 1/64 of its window, never under-count. Sums of
//     whole tokens are exact; a call with no tokens reads the budget and
//     stores nothing. A bucket whose window passed is deleted; one from a
//     limit whose window changed is read by its own width.
//
// # Failing closed
//
// Every operation is bounded by Config.Timeout (default 50ms): the
// dial, each write and read, and the context. There are no retries (one
// could only make the call wait past the timeout) and a small pool
// (16 connections). Every error of Reserve, Release and Check wraps
// usage.ErrUnavailable and says what happened (timed out after 50ms,
// connection refused, authentication failed, script error, refused by the
// server), never the password; a timeout is also context.DeadlineExceeded.
// Broken connections are replaced on the next call: a server back after a
// restart is used again without reopening the store (within about a
// second: a server that could not be dialed is dialed again once a
// second, the calls in between failing at once with that error).
// A Reserve that timed out may still have counted the call in the server:
// its entries stay until their window passes, which can only make a limit
// deny early, never allow past it. A server restarted without persistence
// comes back empty: its counts start again from zero.
//
// # Cost
//
// BenchmarkReserve measures a reservation against a real redis-server on
// loopback: about 50us at the median for one counter, 100us for three
// (one script either way; the server spends about 20us per counter in
// the script on a slow, shared machine), against about 25us for a bare
// PING. Run it with
//
//	go test ./usage/redisstore -run '^$' -bench Reserve -benchtime 10000x
package redisstore
