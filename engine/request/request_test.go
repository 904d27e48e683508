package request

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestDecodeRequest(t *testing.T) {
	t.Parallel()
	req, err := Decode([]byte(` {"tool_name":"pay","kwargs":{"amount":5000,"big":1e300},"args":[1,"a",null],"x":true} ` + "\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := Request{"tool_name": "pay", "kwargs": map[string]any{"amount": 5000.0, "big": 1e300},
		"args": []any{1.0, "a", nil}, "x": true}
	if !reflect.DeepEqual(req, want) {
		t.Errorf("decoded %#v, want %#v", req, want)
	}
}

func TestDecodeRequestRejects(t *testing.T) {
	t.Parallel()
	for _, doc := range []string{
		``,
		` `,
		`{`,
		`{"tool_name":"Bash"`,
		`{"tool_name":"Bash",}`,
		`{'tool_name':'Bash'}`,
		`null`,
		`[]`,
		`[{"tool_name":"Bash"}]`,
		`"Bash"`,
		`5`,
		`{}`,
		`{"agent_id":"a"}`,
		`{"tool_name":null}`,
		`{"tool_name":5}`,
		`{"tool_name":["Bash"]}`,
		`{"tool_name":{"name":"Bash"}}`,
		`{"tool_name":"Bash","kwargs":{"amount":1e400}}`,
		`{"tool_name":"Bash"} {"tool_name":"Edit"}`,
		`{"tool_name":"Bash"} 5`,
		`{"tool_name":"Bash"} x`,
		`{"tool_name":"Bash"}}`,
		`{"tool_name":"Bash"}]`,
		`{"tool_name":"Bash"},`,
		"{\"tool_name\":\"Bash\"}\x00",
	} {
		t.Run(doc, func(t *testing.T) {
			t.Parallel()
			req, err := Decode([]byte(doc))
			if err == nil {
				t.Fatalf("accepted: %#v", req)
			}
			if !errors.Is(err, ErrBadRequest) {
				t.Errorf("error %v does not wrap ErrBadRequest", err)
			}
		})
	}
}

func TestRequestValidate(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		req Request
		ok  bool
	}{
		{Request{"tool_name": "Bash"}, true},
		{Request{"tool_name": ""}, true},
		{Request{}, false},
		{nil, false},
		{Request{"tool_name": 5.0}, false},
		{Request{"tool_name": nil}, false},
	} {
		if err := tc.req.Validate(); (err == nil) != tc.ok {
			t.Errorf("Validate(%#v) = %v, want ok=%v", tc.req, err, tc.ok)
		}
	}
}

// Width is bounded like bytes are: a request with more JSON values than the
// limit is refused on whichever path decodes it, with the error that says
// so, and one at the limit is accepted.
func TestDecodeRequestLimitsTheNumberOfValues(t *testing.T) {
	wide := func(n int, elem, head string) []byte {
		// The object, tool_name and args are three values; args holds the
		// rest, after head.
		return []byte(`{"tool_name":"t"` + head + `,"args":[` + strings.TrimSuffix(strings.Repeat(elem+",", n-3), ",") + `]}`)
	}
	for _, tc := range []struct {
		name string
		doc  []byte
		max  int
		ok   bool
	}{
		{"at the limit", wide(100, "{}", ""), 100, true},
		{"one over", wide(101, "{}", ""), 100, false},
		{"scalars", wide(10001, "1", ""), DefaultMaxElements, false},
		{"a megabyte of empty objects", wide(340000, "{}", ""), DefaultMaxElements, false},
		// A surrogate escape before the array sends the document to
		// encoding/json: the same limit holds there.
		{"fallback at the limit", wide(100, "[]", `,"s":"\ud83d\ude42"`), 101, true},
		{"fallback one over", wide(101, "[]", `,"s":"\ud83d\ude42"`), 100, false},
		{"fallback, wide", wide(200000, "0", `,"s":"\ud800"`), DefaultMaxElements, false},
		{"nested values count", []byte(`{"tool_name":"t","a":{"b":[1,[2,{"c":null}]]}}`), 9, true},
		{"nested values count, one over", []byte(`{"tool_name":"t","a":{"b":[1,[2,{"c":null}]]}}`), 8, false},
		{"keys do not count", []byte(`{"tool_name":"t","a":{},"b":{},"c":{}}`), 5, true},
		{"no limit", wide(20000, "{}", ""), 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req, err := DecodeLimit(tc.doc, tc.max)
			if tc.ok {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if req["tool_name"] != "t" {
					t.Errorf("decoded %v", req["tool_name"])
				}
				return
			}
			if !errors.Is(err, ErrTooManyElements) || !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), fmt.Sprintf("more than %d", tc.max)) {
				t.Errorf("error %v, want too many values, more than %d", err, tc.max)
			}
		})
	}
	// Decode has the default limit.
	if _, err := Decode(wide(DefaultMaxElements+1, "0", "")); !errors.Is(err, ErrTooManyElements) {
		t.Errorf("Decode past DefaultMaxElements: %v", err)
	}
}
