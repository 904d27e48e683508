package jsonvalue

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// quotedByteAtATime is AppendQuoted as it was before it copied runs: the
// reference FuzzAppendQuoted holds it to, byte for byte.
func quotedByteAtATime(dst []byte, s string, htmlSafe bool) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case htmlSafe && (c == '<' || c == '>' || c == '&'):
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c == '\b':
				dst = append(dst, '\\', 'b')
			case c == '\f':
				dst = append(dst, '\\', 'f')
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			dst = append(dst, `\ufffd`...)
		case htmlSafe && (r == '\u2028' || r == '\u2029'):
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return append(dst, '"')
}

var quoteSeeds = []string{
	"", "plain", `denied by rule "r500" of policy "p"`, "a\\b", "<tag>&amp;",
	"line\nbreak\r\ttab\b\f\x00\x1f\x7f", "caf\u00e9 \u2028 \u2029 \U0001F600",
	"bad \xff utf8 \xe2\x82", "\xef\xbf\xbd real replacement char", "sha256:9f2affe95d2967f9",
}

func TestAppendQuotedMatchesByteAtATime(t *testing.T) {
	for _, s := range quoteSeeds {
		checkQuoted(t, s)
	}
}

// FuzzAppendQuoted: the run-copying AppendQuoted writes exactly what the
// byte-at-a-time one wrote, with and without htmlSafe, after any prefix;
// htmlSafe is exactly encoding/json's string encoding.
func FuzzAppendQuoted(f *testing.F) {
	for _, s := range quoteSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { checkQuoted(t, s) })
}

func checkQuoted(t *testing.T, s string) {
	t.Helper()
	for _, htmlSafe := range []bool{false, true} {
		got := string(AppendQuoted([]byte("pre"), s, htmlSafe))
		want := string(quotedByteAtATime([]byte("pre"), s, htmlSafe))
		if got != want {
			t.Fatalf("AppendQuoted(%q, htmlSafe=%v) = %s, want %s", s, htmlSafe, got, want)
		}
	}
	std, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(AppendQuoted(nil, s, true)); got != string(std) {
		t.Fatalf("AppendQuoted(%q, htmlSafe) = %s, encoding/json writes %s", s, got, std)
	}
}
