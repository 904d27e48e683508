package jsonvalue

import (
	"math"
	"testing"
)

func TestCastNumber(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]float64{
		"5000": 5000, " 5000": 5000, "+5000": 5000, " 5e3 ": 5000, "\t\n\v\f\r5\r\n": 5, "-1.5E+2": -150,
		"0": 0, "-0": 0, "1e-400": 0, "1.7976931348623157e308": math.MaxFloat64,
	} {
		if got, ok := CastNumber(in); !ok || got != want {
			t.Errorf("CastNumber(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	for _, in := range []string{"", " ", "+", "0x10", "inf", "+inf", "NaN", "Infinity", "-Infinity", "1_000", "1e400",
		"-1e400", "+-5", "++5", "+ 5", "05", ".5", "5.", "5e", "1,000", "\u00a05", "5\u00a0", "5 5", "e5", "0b1"} {
		if got, ok := CastNumber(in); ok {
			t.Errorf("CastNumber(%q) = %v, want no number", in, got)
		}
	}
}
