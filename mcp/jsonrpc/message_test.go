package jsonrpc

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestParseMCPBodyRefusesAmbiguousKeys(t *testing.T) {
	wide := func(dup bool) string {
		var kv []string
		for i := range 40 {
			kv = append(kv, fmt.Sprintf(`"k%d":%d`, i, i))
		}
		if dup {
			kv = append(kv, `"K7":0`)
		}
		return "{" + strings.Join(kv, ",") + "}"
	}
	for _, c := range []struct {
		body      string
		ambiguous bool
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay","arguments":{"amount":5}}}`, false},
		{`[{"a":1},{"a":2}]`, false},
		{`{"a":{"a":{"a":1}},"b":[{"a":1,"b":2},{"a":3}]}`, false},
		{`{"s":"{\"name\":1,\"name\":2}","name":"x"}`, false},
		{`{"a":[1,2,{"b":"]}"}],"c":{}}`, false},
		{wide(false), false},
		{`{"name":"a","name":"b"}`, true},
		{`{"name":"a","Name":"b"}`, true},
		{`{"name":"a","na\u006de":"b"}`, true},
		{`{"p":{"x":[{"amount":1,"AMOUNT":2}]}}`, true},
		{`{"kind":"a","\u212aind":"b"}`, true}, // the Kelvin sign folds with k
		{`{"ask":1,"aſk":2}`, true},            // the long s folds with s
		{wide(true), true},
		{`[{"a":1,"b":{"c":1},"a":2}]`, true},
	} {
		_, _, err := Parse([]byte(c.body))
		if got := errors.Is(err, errAmbiguousJSON); got != c.ambiguous {
			t.Errorf("%s: ambiguous %v (%v), want %v", c.body, got, err, c.ambiguous)
		}
	}
	for _, bad := range []string{`{"a":1}}`, `{"a":"1`} {
		if _, _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("%s: accepted", bad)
		}
	}
}
