package detect

import (
	"strings"
	"testing"
)

// findRuns finds cards and IBANs in one pass, each keeping its own place:
// with both (and with email between them in the order First tries them)
// the scanner must agree with the reference as each alone does. The texts
// mix the two so that one detector's run moves past the other's place:
// cards inside IBAN-class runs, IBANs next to digit runs, checks failing.
func TestCardsAndIBANsTogether(t *testing.T) {
	t.Parallel()
	texts := []string{
		"DE89 3704 0044 0532 0130 00 4111 1111 1111 1111",
		"4111 1111 1111 1111 DE89 3704 0044 0532 0130 00",
		"4111111111111111 DE89370400440532013000 5555-5555-5555-4444 GB82WEST12345698765432",
		"DE89 3704 0044 0532 0130 01 4111 1111 1111 1112 DE89 3704 0044 0532 0130 00",
		"1234 4111 1111 1111 1111 GB82 WEST 1234 5698 7654 32 x",
		"GB82 WEST 1234 5698 7654 32 4111 1111 1111 1111 a@b.io 4111111111111111",
		"| 133705 | 1582.37 |  69% | 16328070 | 4111 1111 1111 1111 | DE89370400440532013000 |",
		"2026-12-02T15:30:55.625Z 4111-1111-1111-1111 GB82WEST12345698765432 2026-12-02T15",
		strings.Repeat("DE89 4111 ", 20) + "4111 1111 1111 1111",
		strings.Repeat("4111 1111 1111 1111 ", 3) + strings.Repeat("GB82 WEST ", 5),
	}
	for _, c := range corpus {
		texts = append(texts, c.text)
	}
	for _, a := range adversarial {
		texts = append(texts, repeatTo(a.unit, 300))
	}
	for _, text := range texts {
		for _, ds := range [][]Detector{{CreditCard, IBAN}, {CreditCard, Email, IBAN}} {
			agree(t, text, ds)
			// Every suffix: the probes fall elsewhere.
			for k := 1; k < len(text) && k < 14; k++ {
				agree(t, text[k:], ds)
			}
		}
	}
}
