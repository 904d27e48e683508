package detect

import (
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// adversarial are texts made to make a scanner go back over what it has
// read: long runs of what each detector looks for, and of its near misses.
var adversarial = []struct{ name, unit string }{
	{"digits", "1"},
	{"spaced digits", "1 "},
	{"card groups", "4111 "},
	{"dashed digits", "12-"},
	{"ssn heads", "123-45-"},
	{"A", "A"},
	{"AKIA", "AKIA"},
	{"dashes", "-"},
	{"BEGIN lines without END", "-----BEGIN PRIVATE KEY-----"},
	{"END heads", "-----END "},
	{"at signs", "@"},
	{"local parts", "a.b@"},
	{"domains", "a@b."},
	{"labels", "a.b-c."},
	{"base64", "aB3_-"},
	{"eyJ without dots", "eyJ-"},
	{"eyJ one dot", "eyJa.b-"},
	{"colons", ":"},
	{"key names", "token="},
	{"blanks before a separator", "password \t"},
	{"short values", "api_key: 'abc' "},
	{"xox", "xoxb-"},
	{"hooks", "hooks.slack.com/services/T1/"},
	{"ghp", "ghp_"},
	{"words", "ab_"},
	{"IBAN heads", "DE89 "},
	{"IBAN groups", "AB12 ABCD "},
	{"capitals", "AB12CD"},
	{"mixed", "0 -A@.eyJ:=_xob4G1"},
}

func repeatTo(unit string, n int) string {
	return strings.Repeat(unit, n/len(unit)+1)[:n]
}

// TestScanIsLinear: no input makes a scan superlinear. For each
// adversarial text, scanning 1 MiB once must cost less than 2 times
// scanning 64 KiB 16 times (a quadratic scan would cost 16 times). It
// compares CPU time of this thread, the best of three runs each, on the
// same machine and input, so it holds on a loaded machine: it asserts the
// shape of the cost, not a duration.
func TestScanIsLinear(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	s := scannerFor(t, allDetectors())
	dst := make([]Match, 0, 1<<16)
	best := func(text string, times int) time.Duration {
		var min time.Duration
		for r := 0; r < 3; r++ {
			start := threadCPU(t)
			for k := 0; k < times; k++ {
				dst = s.AppendAll(dst[:0], text)
				s.First(text)
			}
			if d := threadCPU(t) - start; r == 0 || d < min {
				min = d
			}
		}
		return min
	}
	for _, a := range adversarial {
		small, large := repeatTo(a.unit, 64<<10), repeatTo(a.unit, 1<<20)
		ts, tl := best(small, 16), best(large, 1)
		if tl > 2*ts+time.Millisecond {
			t.Errorf("%s: 1 MiB took %v, 16 times 64 KiB %v", a.name, tl, ts)
		} else {
			t.Logf("%s: 1 MiB %v, 16 times 64 KiB %v", a.name, tl, ts)
		}
	}
}

// threadCPU is this thread's CPU time (CLOCK_THREAD_CPUTIME_ID, which the
// kernel keeps to the nanosecond; getrusage's is counted in ticks).
func threadCPU(t testing.TB) time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ts.Nano())
}

// The adversarial texts, short, are in the fuzz seeds and agree with the
// reference too.
func TestAdversarialAgree(t *testing.T) {
	t.Parallel()
	for _, a := range adversarial {
		agree(t, repeatTo(a.unit, 300), allDetectors())
	}
}

// BenchmarkAdversarial shows the linearity: each adversarial text at 64
// KiB and 1 MiB side by side.
func BenchmarkAdversarial(b *testing.B) {
	s := scannerFor(b, allDetectors())
	dst := make([]Match, 0, 1<<16)
	for _, a := range adversarial {
		for _, n := range []struct {
			name string
			size int
		}{{"64KiB", 64 << 10}, {"1MiB", 1 << 20}} {
			text := repeatTo(a.unit, n.size)
			b.Run(strings.ReplaceAll(a.name, " ", "_")+"/"+n.name, func(b *testing.B) {
				b.SetBytes(int64(n.size))
				defer cpuPerOp(b)()
				for b.Loop() {
					dst = s.AppendAll(dst[:0], text)
				}
			})
		}
	}
}
