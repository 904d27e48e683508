package detect

import "strings"

// Check is d's check of a candidate Pattern(d) matched (its span: for
// generic_api_key the value): the Luhn check and issuer prefix of a credit
// card number, an IBAN's country and mod-97, a US SSN's reserved numbers;
// true for detectors without one.
func Check(d Detector, candidate string) bool {
	switch d {
	case CreditCard:
		return cardNumber(candidate)
	case IBAN:
		return ibanNumber(candidate)
	case USSSN:
		return ssnNumber(candidate)
	}
	return true
}

// cardNumber: 13 to 19 digits (separators ignored) with a known issuer
// prefix and a valid Luhn check digit.
func cardNumber(s string) bool {
	var digits [19]byte
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ' ' || c == '-' {
			continue
		}
		if c < '0' || c > '9' || n == len(digits) {
			return false
		}
		digits[n] = c - '0'
		n++
	}
	if n < 13 {
		return false
	}
	return knownIssuer(digits[:n]) && luhn(digits[:n])
}

// luhn is the Luhn (mod 10) check over digits, the last being the check
// digit.
func luhn(digits []byte) bool {
	sum := 0
	double := false
	for i := len(digits) - 1; i >= 0; i-- {
		d := int(digits[i])
		if double {
			d *= 2
			if d > 9 {
				d -= 9
			}
		}
		sum += d
		double = !double
	}
	return sum%10 == 0
}

// knownIssuer: the issuer identification number ranges of the card
// networks we recognise (Visa 4; Mastercard 51-55 and 2221-2720; American
// Express 34, 37; Discover 6011, 65, 644-649; JCB 3528-3589; Diners Club
// 36, 38, 300-305). Any other prefix is not a card: this is what keeps
// order numbers, timestamps and other long digit runs that happen to pass
// Luhn (one in ten) out.
func knownIssuer(d []byte) bool {
	p2 := int(d[0])*10 + int(d[1])
	p3 := p2*10 + int(d[2])
	p4 := p3*10 + int(d[3])
	switch {
	case d[0] == 4:
		return true
	case p2 >= 51 && p2 <= 55, p4 >= 2221 && p4 <= 2720:
		return true
	case p2 == 34 || p2 == 37:
		return true
	case p4 == 6011 || p2 == 65 || (p3 >= 644 && p3 <= 649):
		return true
	case p4 >= 3528 && p4 <= 3589:
		return true
	case p2 == 36 || p2 == 38 || (p3 >= 300 && p3 <= 305):
		return true
	}
	return false
}

// ibanNumber: a country of the IBAN registry, 11 to 30 characters after
// the check digits (spaces ignored), and the ISO 13616 check: the number
// with its first four characters moved to the end, letters read as 10-35,
// is 1 modulo 97.
func ibanNumber(s string) bool {
	var buf [34]byte
	n := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == ' ' {
			continue
		}
		if n == len(buf) || !(c >= '0' && c <= '9' || c >= 'A' && c <= 'Z') {
			return false
		}
		buf[n] = c
		n++
	}
	if n < 15 || !ibanCountry(buf[0], buf[1]) {
		return false
	}
	rem := 0
	for i := 0; i < n; i++ {
		c := buf[(i+4)%n]
		if c >= 'A' {
			v := int(c-'A') + 10
			rem = (rem*100 + v) % 97
		} else {
			rem = (rem*10 + int(c-'0')) % 97
		}
	}
	return rem == 1
}

// ibanCountries are the country codes of the IBAN registry (SWIFT, 2025),
// as one string of pairs.
const ibanCountries = "AD AE AL AT AZ BA BE BG BH BI BR BY CH CR CY CZ DE DJ DK DO EE EG ES FI FK FO FR GB GE GI GL GR GT HN HR HU IE IL IQ IS IT JO KW KZ LB LC LI LT LU LV LY MC MD ME MK MN MR MT MU NI NL NO OM PK PL PS PT QA RO RS RU SA SC SD SE SI SK SM SO ST SV TL TN TR UA VA VG XK YE"

// IBANCountries are the country codes iban accepts, for ports of Check
// (the Rego export).
func IBANCountries() []string { return strings.Fields(ibanCountries) }

func ibanCountry(a, b byte) bool {
	for i := 0; i+1 < len(ibanCountries); i += 3 {
		if ibanCountries[i] == a && ibanCountries[i+1] == b {
			return true
		}
	}
	return false
}

// ssnNumber: ddd-dd-dddd that the Social Security Administration could
// have issued: area not 000, 666 or 900-999, group not 00, serial not
// 0000.
func ssnNumber(s string) bool {
	if len(s) != 11 {
		return false
	}
	area, group, serial := s[0:3], s[4:6], s[7:11]
	return area != "000" && area != "666" && area[0] != '9' && group != "00" && serial != "0000"
}
