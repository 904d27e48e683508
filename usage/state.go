package usage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/toolgate/toolgate/internal/atomicfile"
)

// A state file keeps a ledger's counters across restarts of the sidecar
// (--usage-state), so that a restart, whatever caused it, does not start
// every limit from zero. It lives in the sidecar's own volume, which the
// agent's containers do not mount.
//
// It is a snapshot followed by the calls recorded since, each appended as
// it is counted: one write(2) of about a hundred bytes, not synced, so a
// killed process loses nothing (the kernel holds what was written) and
// only a crash of the node can lose the last calls (the Pod's emptyDir
// goes with the node anyway). Once the calls appended outweigh the
// snapshot (and 1 MiB), the ledger is written anew as a snapshot, through
// atomicfile, so a reader sees the old file or the new, never a part.
//
// Layout: stateMagic, then records, each a little-endian uint32 length and
// CRC-32C of its payload, then the payload: 'L' (the ledger's lost times),
// 'C' (one counter; the snapshot lists them least recently recorded
// first) and 'R' (one call recorded). Names are a length byte and the
// name, canonical (at most 72 bytes). A namespace's counter (per:
// namespace) is a 'C' with flag 4, and a call also counted for the
// namespace an 'R' with a trailing byte 1: a file without them reads as it
// did before they existed, and an older sidecar refuses one with them
// (the file is then unreadable, which fails closed) rather than drop the
// namespace's count.
const stateMagic = "toolgate usage state v1\n"

// compactMin is the least a state file's appended calls may grow to
// before it is written anew: about ten thousand calls.
const compactMin = 1 << 20

type stateFile struct {
	path string
	f    *os.File
	// size is the file's length; compacted its length when last written
	// as a snapshot.
	size, compacted int64
	// broken is set when a write failed: the next call writes a snapshot
	// first, and is denied if that fails too.
	broken bool
	buf    []byte
}

// StateLoad says what OpenState found.
type StateLoad struct {
	// Counters and Calls were restored: counters from the snapshot, then
	// calls appended after it.
	Counters, Calls int
	// Unreadable is why the file could not be used (nil when it was, or
	// did not exist). The ledger then starts empty and fails closed for
	// what the file would have held: a limit whose window reaches back
	// before UnknownBefore is denied USAGE_UNAVAILABLE until that window
	// has passed. The file was moved to MovedTo ("" when it could not be).
	Unreadable    error
	UnknownBefore time.Time
	MovedTo       string
}

// OpenState restores the ledger (new, nothing recorded yet) from the state
// file at path, when there is one, and from now on keeps every call it
// records there. A file that cannot be read or is not a state file does not
// stop it (see StateLoad.Unreadable); a path where no state file can be
// written does, as an error naming it.
func (l *Ledger) OpenState(path string, now time.Time) (StateLoad, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state != nil || len(l.series) > 0 {
		return StateLoad{}, errors.New("the usage ledger already holds counters or a state file")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return StateLoad{}, fmt.Errorf("--usage-state %s: %w", path, err)
	}
	var load StateLoad
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err == nil:
		load.Counters, load.Calls, err = l.restore(data)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		// Whatever the file held is unknown: start empty, and count no
		// window that reaches back before now as whole.
		l.reset()
		at := nanos(now)
		l.lost = [2]int64{at, at}
		load = StateLoad{Unreadable: err, UnknownBefore: time.Unix(0, at)}
		if os.Rename(path, path+".unreadable") == nil {
			load.MovedTo = path + ".unreadable"
		}
	}
	l.state = &stateFile{path: path}
	if err := l.state.compact(l); err != nil {
		l.state = nil
		return load, fmt.Errorf("--usage-state %s: writing the state file: %w", path, err)
	}
	return load, nil
}

// CloseState stops keeping calls in the state file (which holds every call
// recorded until now).
func (l *Ledger) CloseState() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.state == nil {
		return nil
	}
	err := l.state.f.Close()
	l.state = nil
	return err
}

func (l *Ledger) reset() {
	l.series = make(map[seriesKey]*series)
	l.agents = make(map[uint64]*owner)
	l.head, l.tail = nil, nil
}

// append keeps one call counted in memory; the caller holds l.mu.
func (st *stateFile) append(l *Ledger, c callKeys, at int64, window time.Duration) error {
	if st.broken || st.size-st.compacted > max(compactMin, st.compacted) {
		// The snapshot holds c already.
		if err := st.compact(l); err != nil {
			st.broken = true
			return st.failed(err)
		}
		return nil
	}
	st.buf = appendCall(st.buf[:0], c, at, window)
	n, err := st.f.Write(st.buf)
	st.size += int64(n)
	if err != nil {
		st.broken = true
		return st.failed(err)
	}
	return nil
}

func (st *stateFile) failed(err error) error {
	return &unavailable{fmt.Sprintf("the usage state file %s could not be written (%v), so this call would not survive a restart of the sidecar; denied to fail closed", st.path, err)}
}

// compact writes l as a snapshot over the file, and appends to it from
// then on.
func (st *stateFile) compact(l *Ledger) error {
	snap := l.snapshot()
	if err := atomicfile.Write(st.path, snap, 0o600); err != nil {
		return err
	}
	f, err := os.OpenFile(st.path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	if st.f != nil {
		_ = st.f.Close()
	}
	st.f, st.size, st.compacted, st.broken = f, int64(len(snap)), int64(len(snap)), false
	return nil
}

// snapshot encodes l: its lost times, then its counters, least recently
// recorded first. The caller holds l.mu.
func (l *Ledger) snapshot() []byte {
	out := []byte(stateMagic)
	out = appendRecord(out, func(p []byte) []byte {
		p = append(p, 'L')
		p = binary.LittleEndian.AppendUint64(p, uint64(l.lost[kindAgent]))
		return binary.LittleEndian.AppendUint64(p, uint64(l.lost[kindSession]))
	})
	for s := l.tail; s != nil; s = s.prev {
		out = appendRecord(out, func(p []byte) []byte {
			flags := byte(0)
			if s.key.session {
				flags |= 1
			}
			if s.key.tokens {
				flags |= 2
			}
			if s.key.namespace {
				flags |= 4
			}
			p = append(p, 'C', flags)
			p = appendName(p, s.id)
			p = appendName(p, s.tool)
			ownerName := ""
			if s.owner != nil {
				ownerName = s.owner.name
			}
			p = appendName(p, ownerName)
			p = binary.LittleEndian.AppendUint64(p, uint64(s.gapUntil))
			p = binary.LittleEndian.AppendUint64(p, math.Float64bits(s.base))
			p = binary.LittleEndian.AppendUint32(p, uint32(s.n))
			for i := range s.n {
				e := s.at(i)
				p = binary.LittleEndian.AppendUint64(p, uint64(e.at))
				p = binary.LittleEndian.AppendUint64(p, math.Float64bits(e.cum))
			}
			return p
		})
	}
	return out
}

func appendCall(out []byte, c callKeys, at int64, window time.Duration) []byte {
	return appendRecord(out, func(p []byte) []byte {
		p = append(p, 'R')
		p = binary.LittleEndian.AppendUint64(p, uint64(at))
		p = binary.LittleEndian.AppendUint64(p, uint64(window))
		p = binary.LittleEndian.AppendUint64(p, math.Float64bits(c.tokens))
		p = appendName(p, c.agent)
		p = appendName(p, c.session)
		p = appendName(p, c.tool)
		if c.namespace {
			p = append(p, 1)
		}
		return p
	})
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendRecord frames the payload payload appends.
func appendRecord(out []byte, payload func([]byte) []byte) []byte {
	start := len(out)
	out = append(out, make([]byte, 8)...)
	out = payload(out)
	p := out[start+8:]
	binary.LittleEndian.PutUint32(out[start:], uint32(len(p)))
	binary.LittleEndian.PutUint32(out[start+4:], crc32.Checksum(p, castagnoli))
	return out
}

func appendName(p []byte, s string) []byte {
	return append(append(p, byte(len(s))), s...)
}

// restore reads a state file into l, which is empty; any error means the
// file is not one this ledger wrote whole.
func (l *Ledger) restore(data []byte) (counters, calls int, err error) {
	rest, ok := cutPrefix(data, stateMagic)
	if !ok {
		return 0, 0, errors.New("not a toolgate usage state file")
	}
	seenLost := false
	for i := 0; len(rest) > 0; i++ {
		if len(rest) < 8 {
			return 0, 0, fmt.Errorf("record %d is cut short", i)
		}
		size, sum := binary.LittleEndian.Uint32(rest), binary.LittleEndian.Uint32(rest[4:])
		if uint64(size) > uint64(len(rest)-8) {
			return 0, 0, fmt.Errorf("record %d is cut short", i)
		}
		p := rest[8 : 8+size]
		rest = rest[8+size:]
		if crc32.Checksum(p, castagnoli) != sum {
			return 0, 0, fmt.Errorf("record %d fails its checksum", i)
		}
		r := &reader{p: p}
		kind := r.byte()
		switch {
		case kind == 'L' && i == 0:
			l.lost[kindAgent], l.lost[kindSession] = int64(r.uint64()), int64(r.uint64())
			seenLost = true
		case kind == 'C' && seenLost && calls == 0:
			err = l.restoreCounter(r)
			counters++
		case kind == 'R' && seenLost:
			at, window, tokens := int64(r.uint64()), time.Duration(r.uint64()), math.Float64frombits(r.uint64())
			c := callKeys{agent: r.name(), session: r.name(), tool: r.name(), tokens: tokens}
			if r.err == nil && len(r.p) > 0 {
				c.namespace = r.byte() == 1 || r.fail("a call counted for no known key")
			}
			if r.err == nil && (!(tokens >= 0) || tokens > math.MaxFloat64 || window < 0) {
				r.err = errors.New("a call out of range")
			}
			if r.err == nil && l.count(c, at, window) != nil {
				// Counted when it was allowed, it no longer fits (the
				// caps were lowered): a window reaching it is not whole.
				l.lost = [2]int64{max(l.lost[kindAgent], at), max(l.lost[kindSession], at)}
			}
			calls++
		default:
			return 0, 0, fmt.Errorf("record %d: unexpected record %q", i, kind)
		}
		if err == nil {
			err = r.done()
		}
		if err != nil {
			return 0, 0, fmt.Errorf("record %d: %w", i, err)
		}
	}
	if !seenLost {
		return 0, 0, errors.New("the file holds no snapshot")
	}
	return counters, calls, nil
}

// restoreCounter adds one counter of a snapshot as the most recently
// recorded; past the caps (lowered since it was written), the least recent
// are forgotten, as remembered losses.
func (l *Ledger) restoreCounter(r *reader) error {
	flags := r.byte()
	id, tool, ownerName := r.name(), r.name(), r.name()
	gapUntil, base, n := int64(r.uint64()), math.Float64frombits(r.uint64()), int(r.uint32())
	if r.err != nil {
		return r.err
	}
	session, tokens, namespace := flags&1 != 0, flags&2 != 0, flags&4 != 0
	if flags > 7 || (tokens && tool != "") || (!session && ownerName != "") || (namespace && (session || id != "")) {
		return errors.New("a counter of no kind")
	}
	if n > MaxEventsLimit || len(r.p) < n*16 || !(base >= 0) || base > math.MaxFloat64 {
		return errors.New("a counter out of range")
	}
	k := seriesKey{session: session, namespace: namespace, tokens: tokens}
	if !namespace {
		k.id = l.hash(id)
	}
	if !tokens {
		k.tool = l.hash(tool)
	}
	if l.series[k] != nil {
		return errors.New("a counter listed twice")
	}
	s := &series{key: k, id: id, tool: tool, gapUntil: gapUntil, base: base}
	prevAt, prevCum := int64(math.MinInt64), base
	events := make([]event, n)
	for i := range events {
		e := event{at: int64(r.uint64()), cum: math.Float64frombits(r.uint64())}
		if e.at <= prevAt || !(e.cum >= prevCum) || e.cum > math.MaxFloat64 {
			return errors.New("a counter's calls out of order")
		}
		events[i], prevAt, prevCum = e, e.at, e.cum
	}
	if n <= l.maxEvents {
		s.buf, s.n = events, n
	} else {
		// Fewer events kept now: merged in as they are counted.
		prev := base
		for _, e := range events {
			s.add(e.at, e.cum-prev, math.MinInt64, l.maxEvents, &l.scratch)
			prev = e.cum
		}
	}
	if session {
		oh := l.hash(ownerName)
		o := l.agents[oh]
		if o == nil {
			o = &owner{name: ownerName, hash: oh}
			l.agents[oh] = o
		}
		s.owner = o
		o.n++
	}
	l.series[k] = s
	l.touch(s)
	if o := s.owner; o != nil && o.n > l.maxSessionKeys {
		l.forget(o.tail, math.MaxInt64, 0)
	}
	if len(l.series) > l.maxKeys {
		l.forget(l.tail, math.MaxInt64, 0)
	}
	return nil
}

// reader reads a record's payload; the first problem sticks in err.
type reader struct {
	p   []byte
	err error
}

func (r *reader) take(n int) []byte {
	if r.err != nil || len(r.p) < n {
		if r.err == nil {
			r.err = errors.New("a record cut short")
		}
		return make([]byte, n)
	}
	b := r.p[:n]
	r.p = r.p[n:]
	return b
}

func (r *reader) byte() byte     { return r.take(1)[0] }
func (r *reader) uint32() uint32 { return binary.LittleEndian.Uint32(r.take(4)) }
func (r *reader) uint64() uint64 { return binary.LittleEndian.Uint64(r.take(8)) }
func (r *reader) name() string   { return string(r.take(int(r.byte()))) }

// fail sets err (unless set) to msg; it returns false, for use in an
// expression.
func (r *reader) fail(msg string) bool {
	if r.err == nil {
		r.err = errors.New(msg)
	}
	return false
}

func (r *reader) done() error {
	if r.err == nil && len(r.p) > 0 {
		r.err = errors.New("a record longer than its content")
	}
	return r.err
}

func cutPrefix(b []byte, prefix string) ([]byte, bool) {
	if len(b) < len(prefix) || string(b[:len(prefix)]) != prefix {
		return b, false
	}
	return b[len(prefix):], true
}
