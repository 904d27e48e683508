package detect

import (
	"fmt"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/wasilibs/go-re2"
)

// realistic is n bytes of what a tool returns, built deterministically:
// prose, JSON records, log lines and tables of numbers, in turn, with
// nothing any detector finds (TestBenchTextHasNoFindings).
func realistic(n int) string {
	var b strings.Builder
	seed := uint32(1)
	rnd := func(k int) int {
		seed = seed*1664525 + 1013904223
		return int(seed>>8) % k
	}
	words := strings.Fields("the agent read a file and wrote its summary to the log while the " +
		"reviewer checked each step against policy before the deploy went out to production " +
		"Kubernetes clusters in three regions with rollback plans ready for every service owner")
	keys := []string{"id", "name", "status", "created_at", "amount", "region", "owner", "tags", "description", "retries"}
	for b.Len() < n {
		switch rnd(4) {
		case 0: // prose
			for s := 0; s < 4; s++ {
				w := words[rnd(len(words))]
				b.WriteString(strings.ToUpper(w[:1]) + w[1:])
				for k := 0; k < 8+rnd(10); k++ {
					b.WriteByte(' ')
					if rnd(12) == 0 {
						fmt.Fprintf(&b, "%d", rnd(3000))
					} else {
						b.WriteString(words[rnd(len(words))])
					}
				}
				b.WriteString(". ")
			}
			b.WriteString("\n\n")
		case 1: // JSON
			b.WriteString("{")
			for k, key := range keys {
				if k > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "%q: ", key)
				switch key {
				case "id", "retries":
					fmt.Fprintf(&b, "%d", rnd(1000000))
				case "amount":
					fmt.Fprintf(&b, "%d.%02d", rnd(100000), rnd(100))
				case "created_at":
					fmt.Fprintf(&b, "\"2026-%02d-%02dT%02d:%02d:%02dZ\"", 1+rnd(12), 1+rnd(28), rnd(24), rnd(60), rnd(60))
				case "tags":
					fmt.Fprintf(&b, "[%q, %q]", words[rnd(len(words))], words[rnd(len(words))])
				default:
					fmt.Fprintf(&b, "%q", words[rnd(len(words))]+" "+words[rnd(len(words))])
				}
			}
			b.WriteString("}\n")
		case 2: // log lines
			for l := 0; l < 5; l++ {
				fmt.Fprintf(&b, "2026-12-02T15:%02d:%02d.%03dZ INFO request_id=%08x method=GET path=/api/v1/items/%d status=200 duration_ms=%d user=%s\n",
					rnd(60), rnd(60), rnd(1000), seed, rnd(100000), rnd(500), words[rnd(len(words))])
			}
		case 3: // a table of numbers
			for r := 0; r < 6; r++ {
				fmt.Fprintf(&b, "| %6d | %4d.%02d | %3d%% | %d |\n", rnd(999999), rnd(9999), rnd(100), rnd(100), rnd(1000000000))
			}
		}
	}
	return b.String()[:n]
}

var (
	text1M  = realistic(1 << 20)
	text64K = text1M[:64<<10]
	// windows are text1M's sixteen 64 KiB parts. A 64 KiB benchmark takes
	// them in turn: scanning one text over and over lets the CPU's branch
	// predictor learn it, which made the same 64 KiB look 1.5 times
	// cheaper than 64 KiB of a fresh text.
	windows = func() (w [16]string) {
		for k := range w {
			w[k] = text1M[k<<16 : (k+1)<<16]
		}
		return w
	}()
)

func TestBenchTextHasNoFindings(t *testing.T) {
	t.Parallel()
	s := scannerFor(t, allDetectors())
	if got := s.AppendAll(nil, text1M); len(got) != 0 {
		t.Fatalf("the benchmark text has findings: %v, first at %q", got, text1M[got[0].Start:got[0].End])
	}
	if got := reference(text64K, allDetectors()); len(got) != 0 {
		t.Fatalf("the reference finds %v in the benchmark text", got)
	}
}

// Nothing found, nothing allocated: First, and AppendAll into a dst with
// room.
func TestNothingFoundAllocatesNothing(t *testing.T) {
	s := scannerFor(t, allDetectors())
	dst := make([]Match, 0, 8)
	if n := testing.AllocsPerRun(10, func() { s.First(text64K) }); n != 0 {
		t.Errorf("First: %v allocations", n)
	}
	if n := testing.AllocsPerRun(10, func() { dst = s.AppendAll(dst[:0], text64K) }); n != 0 {
		t.Errorf("AppendAll: %v allocations", n)
	}
	found := "x 4111111111111111 a@b.io " + text64K
	if n := testing.AllocsPerRun(10, func() { dst = s.AppendAll(dst[:0], found) }); n != 0 || len(dst) != 2 {
		t.Errorf("AppendAll with findings into a dst with room: %v allocations, %v", n, dst)
	}
}

// BenchmarkScan is the target: all detectors over a realistic result in
// which nothing is found, at 64 KiB and 1 MiB side by side.
func BenchmarkScan(b *testing.B) {
	s := scannerFor(b, allDetectors())
	for _, size := range []struct {
		name  string
		texts []string
	}{{"64KiB", windows[:]}, {"1MiB", []string{text1M}}} {
		b.Run("First/"+size.name, func(b *testing.B) {
			b.SetBytes(int64(len(size.texts[0])))
			b.ReportAllocs()
			defer cpuPerOp(b)()
			k := 0
			for b.Loop() {
				if _, ok := s.First(size.texts[k%len(size.texts)]); ok {
					b.Fatal("found")
				}
				k++
			}
		})
		b.Run("AppendAll/"+size.name, func(b *testing.B) {
			dst := make([]Match, 0, 8)
			b.SetBytes(int64(len(size.texts[0])))
			b.ReportAllocs()
			defer cpuPerOp(b)()
			k := 0
			for b.Loop() {
				dst = s.AppendAll(dst[:0], size.texts[k%len(size.texts)])
				k++
			}
		})
	}
}

// BenchmarkDetector is each detector alone over 64 KiB texts: where
// BenchmarkScan's time goes.
func BenchmarkDetector(b *testing.B) {
	for d := Detector(0); d < numDetectors; d++ {
		s := scannerFor(b, []Detector{d})
		b.Run(d.String(), func(b *testing.B) {
			b.SetBytes(64 << 10)
			defer cpuPerOp(b)()
			k := 0
			for b.Loop() {
				s.First(windows[k%len(windows)])
				k++
			}
		})
	}
}

// cpuPerOp reports cpu-ns/op, the CPU time of the benchmark's thread per
// iteration, beside ns/op (wall time): on a machine shared with other work
// the wall time includes the time others had the CPU, the CPU time does
// not. Call it before the loop and defer what it returns.
func cpuPerOp(b *testing.B) func() {
	runtime.LockOSThread()
	start := threadCPU(b)
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(threadCPU(b)-start)/float64(b.N), "cpu-ns/op")
		}
		runtime.UnlockOSThread()
	}
}

// combined is the ten patterns as one alternation: the "one RE2 scan per
// field" of the issue.
func combined() string {
	var alts []string
	for d := Detector(0); d < numDetectors; d++ {
		alts = append(alts, "(?:"+Pattern(d)+")")
	}
	return strings.Join(alts, "|")
}

// BenchmarkRE2Combined measures that scan, with go-re2 and with Go's
// regexp, on the same 64 KiB text as BenchmarkScan: finding the leftmost
// candidate only, before any Check.
func BenchmarkRE2Combined(b *testing.B) {
	b.Run("go-re2/64KiB", func(b *testing.B) {
		re := re2.MustCompile(combined())
		b.SetBytes(64 << 10)
		b.ReportAllocs()
		defer cpuPerOp(b)()
		k := 0
		for b.Loop() {
			if re.FindStringIndex(windows[k%len(windows)]) != nil {
				b.Fatal("found")
			}
			k++
		}
	})
	b.Run("regexp/64KiB", func(b *testing.B) {
		re := regexp.MustCompile(combined())
		b.SetBytes(64 << 10)
		b.ReportAllocs()
		defer cpuPerOp(b)()
		k := 0
		for b.Loop() {
			if re.FindStringIndex(windows[k%len(windows)]) != nil {
				b.Fatal("found")
			}
			k++
		}
	})
}
