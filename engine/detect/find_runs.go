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
// detector keeps its own position, as FindAll would: the next card and
// IBAN start at or after max(pc, i) and max(pi, i) (everything before is
// decided; pc or pi is past the end when not wanted). The probes move i
// alone; only a probe that passes looks at pc and pi.
func findRuns(t string, from, limit int, want uint16) (card, iban runFinding) {
	const stride = 13 // the least match length of both
	card, iban = noRunFinding, noRunFinding
	i, pc, pi := from, from, from
	if want&cCard == 0 {
		pc = len(t) + 1
	}
	if want&cIBANRun == 0 {
		pi = len(t) + 1
	}
	for {
		p := i + stride - 1
		if i > limit || p >= len(t) {
			return card, iban
		}
		// Every byte of a match is of its lead class (a digit; a capital or
		// a digit) or a separator followed by one: so the probe or the byte
		// after it is a lead. Spaces in prose pass the run test, not this.
		//
		// A match from [i, p] holds [start, start+13), so all of [p-6, p]
		// (start <= p-6) or all of [p, p+6] (start > p-6): the run around
		// the probe is 7 long on one side at least (side). In tables a
		// probe often lands in a short run of digits: this sends it on
		// without looking for the run's ends.
		var c, lc, side uint16
		if p+6 < len(t) {
			w := t[p-6 : p+7] // one bounds check for the 13 bytes
			c = class[w[6]]
			lc = c | class[w[7]]
			if c&(lc<<leadShift)&want == 0 {
				i = p + 1
				continue
			}
			side = class[w[0]]&class[w[1]]&class[w[2]]&class[w[3]]&class[w[4]]&class[w[5]] |
				class[w[7]]&class[w[8]]&class[w[9]]&class[w[10]]&class[w[11]]&class[w[12]]
		} else {
			c = class[t[p]]
			lc = c | classAt(t, p+1)
			side = class[t[p-6]] & class[t[p-5]] & class[t[p-4]] & class[t[p-3]] & class[t[p-2]] & class[t[p-1]]
		}
		m := c & (lc << leadShift) & side & want
		if m == 0 {
			i = p + 1
			continue
		}
		pc, pi = max(pc, i), max(pi, i)
		if p >= pc {
			pc = runDetectors[0].follow(t, p, pc, limit, m, &card)
		}
		if p >= pi {
			pi = runDetectors[1].follow(t, p, pi, limit, m, &iban)
		}
		if card.start >= 0 {
			want &^= cCard
		}
		if iban.start >= 0 {
			want &^= cIBANRun
		}
		i = min(pc, pi)
	}
}

// follow is r's new position after a probe at p (at or after its position
// i) that m says may be inside one of its matches: the run around p is
// tried (region), and a finding stored in *f ends r's search.
func (r *runDetector) follow(t string, p, i, limit int, m uint16, f *runFinding) int {
	if m&r.run == 0 {
		return p + 1
	}
	g, next := r.region(t, p, i, limit)
	if g.start >= 0 {
		*f = g
		return len(t) + 1
	}
	return next
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

// classAt is the class of t[j], none past the end.
func classAt(t string, j int) uint16 {
	if j < len(t) {
		return class[t[j]]
	}
	return 0
}
