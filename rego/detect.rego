# ---------------------------------------------------------------------------
# detect: toolgate's built-in detectors (engine/detect). A detector finds
# the leftmost-first, non-overlapping matches of its RE2 pattern
# (data.toolgate.detectors, from detect.Pattern) that pass its check (as
# detect.Check: Luhn and issuer prefix for credit_card, country and mod-97
# for iban, reserved numbers for us_ssn); the span checked is the
# pattern's first group when it has one (generic_api_key's value).
# ---------------------------------------------------------------------------

_detect(s, names) if {
	some name in names
	some m in regex.find_all_string_submatch_n(data.toolgate.detectors[name], s, -1)
	_detect_check(name, _detect_span(m))
}

_detect_span(m) := m[1] if {
	count(m) > 1
} else := m[0]

_detect_check(name, _) if not name in {"credit_card", "iban", "us_ssn"}

_detect_check("credit_card", s) if {
	digits := replace(replace(s, " ", ""), "-", "")
	count(digits) >= 13
	count(digits) <= 19
	_card_issuer(digits)
	ds := [to_number(c) | some c in split(digits, "")]
	n := count(ds)
	sum([_luhn_term(d, (n - 1) - i) | some i, d in ds]) % 10 == 0
}

# The Luhn sum's term for digit d at position pos from the right.
_luhn_term(d, pos) := d if {
	pos % 2 == 0
} else := d * 2 if {
	d * 2 <= 9
} else := (d * 2) - 9

# The issuer identification ranges detect.Check knows.
_card_issuer(digits) if startswith(digits, "4")

_card_issuer(digits) if {
	p := to_number(substring(digits, 0, 2))
	p in {34, 36, 37, 38, 51, 52, 53, 54, 55, 65}
}

_card_issuer(digits) if {
	p := to_number(substring(digits, 0, 3))
	_between(p, 644, 649)
}

_card_issuer(digits) if {
	p := to_number(substring(digits, 0, 3))
	_between(p, 300, 305)
}

_card_issuer(digits) if {
	p := to_number(substring(digits, 0, 4))
	_card_issuer4(p)
}

_card_issuer4(p) if _between(p, 2221, 2720)

_card_issuer4(p) if p == 6011

_card_issuer4(p) if _between(p, 3528, 3589)

_between(x, lo, hi) if {
	x >= lo
	x <= hi
}

_detect_check("iban", s) if {
	t := replace(s, " ", "")
	count(t) >= 15
	count(t) <= 34
	regex.match(`^[0-9A-Z]+$`, t)
	substring(t, 0, 2) in _iban_countries
	moved := concat("", [substring(t, 4, -1), substring(t, 0, 4)])
	digits := split(concat("", [_iban_digits(c) | some c in split(moved, "")]), "")
	n := count(digits)
	terms := [x |
		some i, d in digits
		x := to_number(d) * _pow10_mod97[(n - 1) - i]
	]
	sum(terms) % 97 == 1
}

# A letter reads as 10 (A) to 35 (Z).
_iban_digits(c) := c if {
	regex.match(`^[0-9]$`, c)
} else := format_int(indexof("ABCDEFGHIJKLMNOPQRSTUVWXYZ", c) + 10, 10)

# 10^i modulo 97, for the mod-97 of up to 70 digits without big numbers.
_pow10_mod97 := [
	1, 10, 3, 30, 9, 90, 27, 76, 81, 34, 49, 5, 50, 15, 53, 45, 62, 38, 89, 17, 73, 51, 25, 56, 75, 71, 31, 19, 93, 57, 85, 74, 61, 28, 86,
	84, 64, 58, 95, 77, 91, 37, 79, 14, 43, 42, 32, 29, 96, 87, 94, 67, 88, 7, 70, 21, 16, 63, 48, 92, 47, 82, 44, 52, 35, 59, 8, 80, 24, 46,
]

_iban_countries := {c | some c in split(data.toolgate.ibanCountries, " ")}

_detect_check("us_ssn", s) if {
	count(s) == 11
	not substring(s, 0, 3) in {"000", "666"}
	not startswith(s, "9")
	substring(s, 4, 2) != "00"
	substring(s, 7, 4) != "0000"
}
