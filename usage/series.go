package usage

import "math"

// event is the end of one allowed call (or, after an overflow or at one
// instant, of several): at is Unix nanoseconds, cum the series' running
// total up to and including it. Running totals make a window's sum two
// binary searches and a subtraction, whatever it holds.
type event struct {
	at  int64
	cum float64
}

// scratch is merge's working space, one per ledger (merges run under its
// lock), so a merge does not allocate.
type scratch struct {
	costs, sorted []float64
}

// series is one counter's events, oldest first, in a ring that grows by
// doubling up to its cap. Times never decrease: an event recorded earlier
// than the newest is stamped with the newest time, so a count can only
// look newer, never older, than it was.
type series struct {
	buf   []event
	start int // index in buf of the oldest event
	n     int // events held
	// base is the running total before the oldest event held: what
	// pruned events added.
	base float64

	// The ledger's list of series, most recently recorded first.
	key        seriesKey
	prev, next *series
	// id and tool are the names key hashes (canonical): a state file
	// keeps counters by them. tool is "" for tokens.
	id, tool string
	// owner is the agent whose call made a session counter (nil for an
	// agent's), and oprev, onext its place in that agent's list.
	owner        *owner
	oprev, onext *series
	// gapUntil: calls up to this time may be missing (the counter was made
	// after one of its kind was forgotten, see Ledger.lost), so a window
	// reaching back to it cannot be counted.
	gapUntil int64
}

// at is the i-th event, 0 the oldest.
func (s *series) at(i int) *event { return &s.buf[(s.start+i)%len(s.buf)] }

func (s *series) newest() int64 {
	if s.n == 0 {
		return math.MinInt64
	}
	return s.at(s.n - 1).at
}

func (s *series) total() float64 {
	if s.n == 0 {
		return s.base
	}
	return s.at(s.n - 1).cum
}

// add records n at time at, first dropping events at or before horizon (no
// window reaches them). When the series holds maxEvents, one event merges
// into the next one, which keeps its later time (see merge): counts can
// only be over-estimated by it, never under-estimated.
func (s *series) add(at int64, n float64, horizon int64, maxEvents int, sc *scratch) {
	s.prune(horizon)
	cum := saturatingAdd(s.total(), n)
	if s.n > 0 && at <= s.newest() {
		// The same instant (or a clock stepped back): no second slot.
		s.at(s.n - 1).cum = cum
		return
	}
	if s.n == maxEvents {
		s.merge(at, sc)
	}
	if s.n == len(s.buf) {
		s.grow(maxEvents)
	}
	*s.at(s.n) = event{at: at, cum: cum}
	s.n++
}

// merge makes room for an event at now by merging events into the next
// ones: removing an event from the running totals leaves its amount in the
// next one's, at that later time. The events merged are those whose time
// moves by the smallest fraction of their age, so every event stays within
// a small fraction of its age of its true time, and recent ones (which
// short windows count) stay exact longest. (Always merging the two oldest
// instead would fold everything ever recorded into one event re-stamped
// with ever later times: once a counter overflowed, every window would
// count all of its history.) Up to a quarter of the events merge at once,
// so the scan is paid once per that many calls.
func (s *series) merge(now int64, sc *scratch) {
	ev := s.linear()
	costs := sc.costs[:0]
	for i := 0; i < len(ev)-1; i++ {
		// now > ev[i+1].at > ev[i].at: the age is positive, the cost below 1.
		costs = append(costs, float64(ev[i+1].at-ev[i].at)/float64(now-ev[i].at))
	}
	// Candidates are the half of events that move least; at most a
	// quarter merge, as neighbours among them are skipped.
	sorted := append(sc.sorted[:0], costs...)
	sc.costs, sc.sorted = costs, sorted
	k := max(1, len(ev)/4)
	threshold := nthSmallest(sorted, min(2*k, len(sorted))-1)
	// Compact in place, keeping the newest event always (nothing after it
	// could take its amount) and never merging two neighbours in one pass
	// (the first would move twice as far as its cost says).
	w, merged, prevMerged := 0, 0, false
	for r := range ev {
		if r < len(ev)-1 && merged < k && !prevMerged && costs[r] <= threshold {
			merged, prevMerged = merged+1, true
			continue
		}
		prevMerged = false
		ev[w] = ev[r]
		w++
	}
	s.n = w
}

// linear rotates the ring so its events start at buf[0], and returns them.
func (s *series) linear() []event {
	if s.start != 0 {
		// Rotating left by start, in place: buf[i] becomes event i.
		reverse(s.buf[:s.start])
		reverse(s.buf[s.start:])
		reverse(s.buf)
		s.start = 0
	}
	return s.buf[:s.n]
}

func reverse(ev []event) {
	for i, j := 0, len(ev)-1; i < j; i, j = i+1, j-1 {
		ev[i], ev[j] = ev[j], ev[i]
	}
}

func (s *series) drop() {
	s.start = (s.start + 1) % len(s.buf)
	s.n--
}

func (s *series) prune(horizon int64) {
	for s.n > 0 && s.at(0).at <= horizon {
		s.base = s.at(0).cum
		s.drop()
	}
}

// grow doubles the ring (from 4), at most to maxEvents: most counters stay
// small, so memory is spent only where calls are.
func (s *series) grow(maxEvents int) {
	buf := make([]event, min(max(2*len(s.buf), 4), maxEvents))
	for i := range s.n {
		buf[i] = *s.at(i)
	}
	s.buf, s.start = buf, 0
}

// sum is what the events in (from, to] add up to. A running total that
// saturated reads as +Inf: too much to count is over every limit.
func (s *series) sum(from, to int64) float64 {
	hi, lo := s.totalAt(to), s.totalAt(from)
	if hi == math.MaxFloat64 {
		return math.Inf(1)
	}
	return hi - lo
}

// totalAt is the running total at time t: that of the newest event at or
// before t, or base when there is none.
func (s *series) totalAt(t int64) float64 {
	// The first event after t, by binary search over the ring.
	i, j := 0, s.n
	for i < j {
		h := int(uint(i+j) >> 1)
		if s.at(h).at <= t {
			i = h + 1
		} else {
			j = h
		}
	}
	if i == 0 {
		return s.base
	}
	return s.at(i - 1).cum
}

// saturatingAdd keeps a running total finite: tokens are any finite
// number, and two huge ones would otherwise make +Inf, and +Inf - +Inf NaN.
func saturatingAdd(a, b float64) float64 {
	if c := a + b; c <= math.MaxFloat64 {
		return c
	}
	return math.MaxFloat64
}

// nthSmallest is the n-th smallest of xs (0 the smallest), by quickselect:
// it reorders xs.
func nthSmallest(xs []float64, n int) float64 {
	lo, hi := 0, len(xs)-1
	for lo < hi {
		pivot := xs[lo+(hi-lo)/2]
		i, j := lo, hi
		for i <= j {
			for xs[i] < pivot {
				i++
			}
			for xs[j] > pivot {
				j--
			}
			if i <= j {
				xs[i], xs[j] = xs[j], xs[i]
				i, j = i+1, j-1
			}
		}
		switch {
		case n <= j:
			hi = j
		case n >= i:
			lo = i
		default:
			return xs[n]
		}
	}
	return xs[n]
}
