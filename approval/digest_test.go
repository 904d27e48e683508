package approval

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"testing"

	"github.com/toolgate/toolgate/engine"
)

// request decodes a request as the sidecar does (encoding/json's values).
func request(t *testing.T, doc string) engine.Request {
	t.Helper()
	var r engine.Request
	if err := json.Unmarshal([]byte(doc), &r); err != nil {
		t.Fatalf("%s: %v", doc, err)
	}
	return r
}

func TestDigestKnownVector(t *testing.T) {
	// Written by hand: keys sorted at every level, no spaces, 2.50 as 2.5,
	// 1.0 as 1, non-ASCII and <&> as they are, only the argument fields.
	const canonical = `{"args":[1,2.5,"x"],"input":{"a":"é<&>","b":null},"kwargs":{"amount":1000,"to":{"iban":"DE00","name":"Zoë"}}}`
	sum := sha256.Sum256([]byte(canonical))
	want := "sha256:" + hex.EncodeToString(sum[:])
	got := Digest(request(t, `{
		"tool_name": "pay", "agent_id": "shop-agent",
		"kwargs": {"to": {"name": "Zoë", "iban": "DE00"}, "amount": 1000.0},
		"input": {"b": null, "a": "é<&>"},
		"args": [1, 2.50, "x"]
	}`))
	if got != want {
		t.Errorf("Digest = %s, want %s (sha256 of %s)", got, want, canonical)
	}
}

func TestDigestIgnoresKeyOrderSpacingAndOtherFields(t *testing.T) {
	base := Digest(request(t, `{"tool_name":"pay","kwargs":{"amount":5000,"to":{"iban":"DE00","tags":["a","b"]}}}`))
	for _, doc := range []string{
		`{"kwargs":{"to":{"tags":["a","b"],"iban":"DE00"},"amount":5000},"tool_name":"pay"}`,
		"{\n  \"kwargs\" : { \"amount\" : 5000 ,\t\"to\": {\"iban\": \"DE00\", \"tags\": [ \"a\" , \"b\" ] } }\n}",
		`{"kwargs":{"amount":5000.0,"to":{"iban":"DE00","tags":["a","b"]}},"agent_id":"x","tool_name":"refund"}`,
		`{"kwargs":{"amount":5e3,"to":{"iban":"DE00","tags":["a","b"]}}}`,
		`{"kwargs":{"amount":5000,"to":{"iban":"\u0044E00","tags":["a","b"]}}}`,
	} {
		if got := Digest(request(t, doc)); got != base {
			t.Errorf("%s: %s, want %s", doc, got, base)
		}
	}
}

func TestDigestChangesWithAnyValue(t *testing.T) {
	docs := []string{
		`{"kwargs":{"amount":5000,"to":{"iban":"DE00","tags":["a","b"]}}}`,
		`{"kwargs":{"amount":5001,"to":{"iban":"DE00","tags":["a","b"]}}}`,
		`{"kwargs":{"amount":5000.5,"to":{"iban":"DE00","tags":["a","b"]}}}`,
		`{"kwargs":{"amount":"5000","to":{"iban":"DE00","tags":["a","b"]}}}`,
		`{"kwargs":{"amount":5000,"to":{"iban":"DE01","tags":["a","b"]}}}`,
		`{"kwargs":{"amount":5000,"to":{"iban":"DE00","tags":["b","a"]}}}`,
		`{"kwargs":{"amount":5000,"to":{"iban":"DE00","tags":["a"]}}}`,
		`{"kwargs":{"amount":5000,"to":{"iban":"DE00","tags":["a","b"],"x":null}}}`,
		`{"kwargs":{"amount":5000,"to":{"iban":"DE00","tags":"a,b"}}}`,
		`{"kwargs":{"amount":5000,"to":{"IBAN":"DE00","tags":["a","b"]}}}`,
		`{"kwargs":{"amount":5000,"to":{"iban":"DE00","tags":["a","b"]}},"args":[]}`,
		`{"args":{"amount":5000,"to":{"iban":"DE00","tags":["a","b"]}}}`,
		`{"input":{"amount":5000,"to":{"iban":"DE00","tags":["a","b"]}}}`,
		`{"kwargs":{"amount":true}}`,
		`{"kwargs":{"amount":false}}`,
		`{"kwargs":{"amount":null}}`,
		`{"kwargs":{}}`,
		`{}`,
		`{"kwargs":{"note":"Zoë"}}`,
		`{"kwargs":{"note":"Zoe\u0308"}}`, // the same text, not the same characters
		`{"kwargs":{"note":"日本"}}`,
		`{"kwargs":{"note":"😀"}}`,
	}
	seen := map[string]string{}
	for _, doc := range docs {
		d := Digest(request(t, doc))
		if prev, ok := seen[d]; ok {
			t.Errorf("%s and %s share digest %s", prev, doc, d)
		}
		seen[d] = doc
	}
}

func TestCanonicalNumbers(t *testing.T) {
	for _, tc := range []struct {
		v    any
		want string
	}{
		{float64(1), "1"}, {int(1), "1"}, {int64(1), "1"},
		{1.5, "1.5"}, {-2.25, "-2.25"}, {0.1, "0.1"},
		{1e20, "100000000000000000000"}, {1e21, "1e+21"}, {1e-7, "1e-7"}, {0.000001, "0.000001"},
		{math.Copysign(0, -1), "0"}, {1.5e300, "1.5e+300"},
		{float64(9007199254740993), "9007199254740992"}, // as float64 decodes it
	} {
		if got := string(Canonical(nil, tc.v)); got != tc.want {
			t.Errorf("Canonical(%T %v) = %s, want %s", tc.v, tc.v, got, tc.want)
		}
	}
	for _, doc := range []string{`1`, `1.0`, `1e0`, `10e-1`, `1.000`} {
		var v any
		if err := json.Unmarshal([]byte(doc), &v); err != nil {
			t.Fatal(err)
		}
		if got := string(Canonical(nil, v)); got != "1" {
			t.Errorf("%s: %s, want 1", doc, got)
		}
	}
}

func TestCanonicalNested(t *testing.T) {
	v := map[string]any{
		"z": []any{map[string]any{"b": 1.0, "a": []any{}}, nil, "s"},
		"a": map[string]any{"y": map[string]any{"d": true, "c": false}, "x": map[string]any{}},
		"":  "empty key",
	}
	const want = `{"":"empty key","a":{"x":{},"y":{"c":false,"d":true}},"z":[{"a":[],"b":1},null,"s"]}`
	if got := string(Canonical(nil, v)); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// Strings are written as JSON.stringify writes them: encoding/json's
// escapes without its HTML ones (<, >, &, U+2028, U+2029); unicode as is,
// control characters escaped, invalid UTF-8 as U+FFFD.
func TestCanonicalStringsAsJSONStringify(t *testing.T) {
	for _, s := range []string{
		"", "plain", "é", "Zoë", "日本語", "😀", "<&>", `quote " and \ backslash`,
		"tab\tnew\nline\rcr", "\x00\x01\x1f\x7f", "\u2028\u2029", "bad \xff utf8", "\xed\xa0\x80",
	} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(b.Bytes(), []byte("\n"))
		// encoding/json escapes U+2028 and U+2029 even so; JSON.stringify
		// does not.
		want = bytes.ReplaceAll(want, []byte(`\u2028`), []byte("\u2028"))
		want = bytes.ReplaceAll(want, []byte(`\u2029`), []byte("\u2029"))
		if got := Canonical(nil, s); !bytes.Equal(got, want) {
			t.Errorf("%q: %s, want %s", s, got, want)
		}
	}
	// Keys are strings too, and sorted by their bytes.
	got := string(Canonical(nil, map[string]any{"é": 1.0, "z": 2.0, "Z": 3.0, "a\n": 4.0}))
	if want := `{"Z":3,"a\n":4,"z":2,"é":1}`; got != want {
		t.Errorf("keys: %s, want %s", got, want)
	}
}

// A number of a type a decoded request never holds digests by its value.
func TestCanonicalOtherNumberTypes(t *testing.T) {
	for _, v := range []any{json.Number("1"), int(1), int64(1), uint8(1), float64(1)} {
		if got := string(Canonical(nil, v)); got != "1" {
			t.Errorf("%T 1: %s", v, got)
		}
	}
	if a, b := Canonical(nil, json.Number("1")), Canonical(nil, json.Number("2")); bytes.Equal(a, b) {
		t.Errorf("json.Number 1 and 2 both canonical as %s", a)
	}
}
