package detect

// Cards and IBANs are long runs of few byte classes: a card at least 13
// bytes of [0-9 -], an IBAN at least 14 of [A-Z0-9 ]. findRuns looks for
// both in one pass, probing one byte in 13: a probe outside a detector's
// run class, or in it but with a side too short, means none of its matches
// starts in the 13 bytes up to the probe. The digits of logs and tables
// make probes land in short runs often, and both detectors read the same
// bytes: one pass reads them once.

// runFinding is one detector's next finding from findRuns: start < 0 when
// there is none up to the limit.
type runFinding struct{ start, end int }

var noRunFinding = runFinding{-1, -1}

// runDetector is what findRuns needs of credit_card or iban: its run class
// (the bit of want), the least length of a match and the match at a byte.
type runDetector struct {
	d     Detector
	run   uint16
	least int
	at    func(string, int) int
}

var runDetectors = [2]runDetector{
	{CreditCard, cCard, 13, cardAt},
	{IBAN, cIBANRun, 14, ibanAt},
}

// findRuns is the next finding of credit_card (if want has cCard) and of
// iban (cIBANRun) at or after from, starting no later than limit. Each
// detector keeps its own position, as FindAll would: pos[k] is where
// runDetectors[k]'s next match may start (everything before it is
// decided; past the end when it is not wanted), and the probe goes on from
// the lesser.
func findRuns(t string, from, limit int, want uint16) (card, iban runFinding) {
	const stride = 13 // the least match length of both
	found := [2]runFinding{noRunFinding, noRunFinding}
	pos := [2]int{from, from}
	for k := range runDetectors {
		if want&runDetectors[k].run == 0 {
			pos[k] = len(t) + 1
		}
	}
	for {
		i := min(pos[0], pos[1])
		p := i + stride - 1
		if i > limit || p >= len(t) {
			break
		}
		// Every byte of a match is of its lead class (a digit; a capital or
		// a digit) or a separator followed by one: so the probe or the byte
		// after it is a lead. Spaces in prose pass the run test, not this.
		c := class[t[p]]
		lc := c
		if p+1 < len(t) {
			lc |= class[t[p+1]]
		}
		if m := c & (lc << leadShift) & want; m != 0 {
			// A match from [i, p] holds [start, start+13), so all of
			// [p-6, p] (start <= p-6) or all of [p, p+6] (start > p-6): the
			// run around the probe is 7 long on one side at least. In
			// tables a probe often lands in a short run of digits: this
			// sends it on without looking for the run's ends.
			side := class[t[p-6]] & class[t[p-5]] & class[t[p-4]] & class[t[p-3]] & class[t[p-2]] & class[t[p-1]]
			if p+6 < len(t) {
				side |= class[t[p+1]] & class[t[p+2]] & class[t[p+3]] & class[t[p+4]] & class[t[p+5]] & class[t[p+6]]
			}
			if m &= side; m != 0 {
				want = runRegions(t, p, limit, m, want, &pos, &found)
				continue
			}
		}
		pos[0], pos[1] = max(pos[0], p+1), max(pos[1], p+1)
	}
	return found[0], found[1]
}

// runRegions follows up a probe at p that m says may be inside a match of
// the detectors of its bits: each such detector whose position is not past
// p tries the run around p (region); the others move past p. It returns
// want without the detectors found.
func runRegions(t string, p, limit int, m, want uint16, pos *[2]int, found *[2]runFinding) uint16 {
	for k := range runDetectors {
		r := &runDetectors[k]
		if p < pos[k] {
			continue
		}
		if m&r.run == 0 {
			pos[k] = p + 1
			continue
		}
		f, next := r.region(t, p, pos[k], limit)
		if f.start >= 0 {
			found[k] = f
			want &^= r.run
			next = len(t) + 1
		}
		pos[k] = next
	}
	return want
}

// region tries every position of the run of r.run around p (from i on) in
// turn, as FindAll would: the run begins at i or after a byte outside it,
// so no earlier match overlaps it. It returns the first match that passes
// Check, or where the search goes on: the run's end.
func (r *runDetector) region(t string, p, i, limit int) (runFinding, int) {
	re := runEnd(t, p+1, r.run)
	rs := runStart(t, p, i, r.run)
	if re-rs < r.least {
		return noRunFinding, re
	}
	for q := rs; q < re && q <= limit; {
		// Every match starts with a word byte after a non-word one.
		if !is(t[q], cWord) || wordBefore(t, q) {
			q++
			continue
		}
		e := r.at(t, q)
		if e < 0 {
			q++
			continue
		}
		if Check(r.d, t[q:e]) {
			return runFinding{q, e}, e
		}
		q = e
	}
	return noRunFinding, re
}
