package request

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/toolgate/toolgate/engine/internal/fastjson"
)

// sameJSON compares decoded values strictly: the same types, and floats by
// their bits, so -0 and 0 differ.
func sameJSON(a, b any) bool {
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool, string:
		return a == b
	case float64:
		y, ok := b.(float64)
		return ok && math.Float64bits(x) == math.Float64bits(y)
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) || (x == nil) != (y == nil) {
			return false
		}
		for i := range x {
			if !sameJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, present := y[k]
			if !present || !sameJSON(v, w) {
				return false
			}
		}
		return true
	}
	return false
}

// checkFast is the contract: whatever the fast decoder accepts,
// encoding/json accepts as the same object.
func checkFast(t *testing.T, doc []byte) (accepted bool) {
	t.Helper()
	got, outcome := fastjson.Object(doc, 0)
	if outcome != fastjson.Decoded {
		return false
	}
	var want any
	if err := json.Unmarshal(doc, &want); err != nil {
		t.Fatalf("fast decoder accepted %q, encoding/json rejects it: %v", doc, err)
	}
	if !sameJSON(got, want) {
		t.Fatalf("fast decoder read %q as %#v, encoding/json as %#v", doc, got, want)
	}
	// The scan the encoding/json fallback limits by counts what the fast
	// decoder parsed (a repeated key's values included), so the limit
	// means the same on both paths: the document passes at its count and
	// fails one below.
	n := fastjson.Count(doc, math.MaxInt)
	if built := valuesIn(got); built > n { // fewer only when a key repeats
		t.Fatalf("%q: built %d values, fastjson.Count says %d", doc, built, n)
	}
	for _, limit := range []int{n - 1, n} {
		_, fast := DecodeLimit(doc, limit)
		_, std := decodeStd(doc, limit)
		want := limit > 0 && n > limit
		if errors.Is(fast, ErrTooManyElements) != want || errors.Is(std, ErrTooManyElements) != want {
			t.Fatalf("%q (%d values) with at most %d: fast path %v, encoding/json path %v", doc, n, limit, fast, std)
		}
	}
	return true
}

// valuesIn counts v and every value inside it.
func valuesIn(v any) int {
	n := 1
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			n += valuesIn(e)
		}
	case map[string]any:
		for _, e := range x {
			n += valuesIn(e)
		}
	}
	return n
}

// Documents the fast path must take (or it is dead weight), each checked
// against encoding/json.
func TestFastDecoderTakesOrdinaryRequests(t *testing.T) {
	for _, doc := range []string{
		`{}`,
		` {"tool_name":"Bash"} `,
		"\t\r\n{\"tool_name\" : \"Bash\" , \"agent_id\":\"a\"}\n",
		`{"tool_name":"Bash","agent_id":"agent-1","session_id":"s-1","input":{"command":"ls -la /var/log"}}`,
		`{"tool_name":"pay","kwargs":{"amount":5000,"currency":"EUR","memo":null,"urgent":false,"ok":true}}`,
		`{"tool_name":"t","args":[0,-0,1,-1,0.5,-0.25,1e3,1E-3,2.5e+10,123456789012345,1234567890123456,-9007199254740993]}`,
		`{"tool_name":"t","args":[[],{},[[]],[{}],[1,[2,[3]]]]}`,
		`{"tool_name":"esc","input":{"s":"a\"b\\c\/d\be\ff\ng\rh\ti\u0041\u00e9\u20ac\u0000"}}`,
		`{"tool_name":"utf8","input":{"s":"héllo €uro 日本 🙂","é":"key"}}`,
		`{"tool_name":"dup","tool_name":"last"}`,
		`{"tool_name":"t","input":{"a":1,"a":{"b":2}}}`,
		`{"":"empty key","tool_name":"t"}`,
		`{"tool_name":"big","n":1.7976931348623157e308,"tiny":5e-324,"under":1e-400}`,
		`{"tool_name":"esc-utf8","s":"é\n"}`,
		`{"tool_name":"t","` + strings.Repeat("x", 100) + `":"` + strings.Repeat("y", 10000) + `"}`,
		`{"tool_name":"t","a":` + strings.Repeat("[", fastjson.MaxDepth-1) + strings.Repeat("]", fastjson.MaxDepth-1) + `}`,
	} {
		if !checkFast(t, []byte(doc)) {
			t.Errorf("fast decoder declined %q", doc)
		}
	}
}

// Documents the fast path must hand to encoding/json: malformed ones (so
// the error is encoding/json's) and valid ones whose semantics it leaves
// to encoding/json.
func TestFastDecoderDeclinesWhatItShouldNot(t *testing.T) {
	for _, doc := range []string{
		``, ` `, `[]`, `"s"`, `1`, `null`, `{`, `}`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{,}`, `{"a":1 "b":2}`,
		`{"a":1}x`, `{"a":1}{}`, `{'a':1}`, `{a:1}`, `{"a":[1,]}`, `{"a":[,1]}`, `{"a":[1 2]}`,
		`{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":1e+}`, `{"a":-}`, `{"a":+1}`, `{"a":0x10}`,
		`{"a":NaN}`, `{"a":Infinity}`, `{"a":tru}`, `{"a":nul}`, `{"a":True}`, `{"a":falsey}`,
		"{\"a\":\"tab\there\"}", "{\"a\":\"nl\nhere\"}", `{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"\u12G4"}`,
		`{"a":"unterminated}`, `{"a":"trailing backslash\`,
		// Valid, but left to encoding/json.
		`{"a":1e400}`, `{"a":-1e400}`,
		`{"a":"\ud83d\ude42"}`, `{"a":"\ud800"}`, `{"a":"\udc00x"}`,
		"{\"a\":\"\xff\"}", "{\"\xc3\":1}", "{\"a\":\"\xed\xa0\x80\"}",
		`{"a":` + strings.Repeat("[", fastjson.MaxDepth) + strings.Repeat("]", fastjson.MaxDepth) + `}`,
	} {
		if checkFast(t, []byte(doc)) {
			t.Errorf("fast decoder took %q", doc)
		}
	}
}

// Decode answers the same whichever decoder ran: the values, and
// for a rejected document the error text.
func TestDecodeRequestFallsBackToEncodingJSON(t *testing.T) {
	for _, tc := range []struct{ doc, err string }{
		{`{"tool_name":"t","a":"\ud83d\ude42"}`, ""},
		{"{\"tool_name\":\"\xff\"}", ""},
		{`{"tool_name":"t","a":1e400}`, "cannot unmarshal number 1e400"},
		{`{"tool_name":1}`, "tool_name must be a string, not a number"},
		{`{"agent_id":"a"}`, "tool_name is required"},
		{`{"tool_name":"t",}`, "not valid JSON: invalid character '}'"},
		{`[1]`, "must be a JSON object, not an array"},
		{`{"tool_name":"t"} x`, "trailing data"},
	} {
		req, err := Decode([]byte(tc.doc))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%q: %v", tc.doc, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%q: error %v, want %q", tc.doc, err, tc.err)
		case tc.err == "":
			var want map[string]any
			if err := json.Unmarshal([]byte(tc.doc), &want); err != nil || !sameJSON(map[string]any(req), want) {
				t.Errorf("%q: %#v, encoding/json %#v", tc.doc, req, want)
			}
		}
	}
	if got, _ := Decode([]byte("{\"tool_name\":\"\xff\"}")); got["tool_name"] != "\uFFFD" {
		t.Errorf("invalid UTF-8 read as %q, want encoding/json's U+FFFD", got["tool_name"])
	}
}

// Random requests as encoding/json writes them all take the fast path and
// decode to what was written.
func TestFastDecoderRoundTripsGeneratedRequests(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	for i := range 3000 {
		want := map[string]any{"tool_name": fmt.Sprint("tool_", i), "input": randomJSON(rng, 4)}
		doc, err := json.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if !checkFast(t, doc) {
			t.Fatalf("fast decoder declined %s", doc)
		}
	}
}

func randomJSON(rng *rand.Rand, depth int) any {
	switch k := rng.IntN(8); {
	case depth == 0 || k < 2:
		return []any{nil, true, false}[rng.IntN(3)]
	case k == 2:
		return math.Float64frombits(rng.Uint64()&^(0x7ff<<52)) * float64(rng.IntN(1e6)) // finite
	case k == 3:
		return float64(rng.IntN(2e9) - 1e9)
	case k == 4:
		runes := []rune("aé\"\\/\n\t\x00\x1f<>&€🙂\u2028")
		var b strings.Builder
		for range rng.IntN(12) {
			b.WriteRune(runes[rng.IntN(len(runes))])
		}
		return b.String()
	case k == 5:
		a := make([]any, rng.IntN(4))
		for i := range a {
			a[i] = randomJSON(rng, depth-1)
		}
		return a
	default:
		m := map[string]any{}
		for range rng.IntN(4) {
			m[fmt.Sprint("k", rng.IntN(6))] = randomJSON(rng, depth-1)
		}
		return m
	}
}

func FuzzFastDecoder(f *testing.F) {
	for _, s := range []string{
		`{"tool_name":"Bash","input":{"command":"rm -rf /"}}`,
		`{"a":[1,-0,2.5e-3,{"b":null}],"c":"\u00e9\"\\"}`,
		`{"a":1e400}`, `{"a":"\ud83d\ude42"}`, "{\"a\":\"\xff\"}", `{"a":01}`, `{"a":1,}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		checkFast(t, doc)
	})
}

// BenchmarkDecodeRequest puts the fast decoder and encoding/json side by
// side on the sidecar benchmark's request, in one run.
func BenchmarkDecodeRequest(b *testing.B) {
	docs := map[string]string{
		"small": `{"tool_name":"tool_500","agent_id":"agent-1","session_id":"s-1","input":{"command":"run danger_500 now"},"kwargs":{"amount":5000}}`,
		"1KiB":  `{"tool_name":"Write","agent_id":"agent-1","session_id":"s-1","input":{"file_path":"/tmp/notes.md","content":"` + strings.Repeat("lorem ipsum ", 80) + `"},"args":[1,2,3,"four",{"five":5.5}]}`,
	}
	for _, name := range []string{"small", "1KiB"} {
		doc := []byte(docs[name])
		for _, dec := range []struct {
			name string
			fn   func([]byte) (Request, error)
		}{{"fast", Decode}, {"encoding-json", func(doc []byte) (Request, error) { return decodeStd(doc, DefaultMaxElements) }}} {
			b.Run(name+"/"+dec.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(doc)))
				for b.Loop() {
					if _, err := dec.fn(doc); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
