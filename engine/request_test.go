package engine

import (
	"errors"
	"reflect"
	"testing"
)

func TestDecodeRequest(t *testing.T) {
	t.Parallel()
	req, err := DecodeRequest([]byte(` {"tool_name":"pay","kwargs":{"amount":5000,"big":1e300},"args":[1,"a",null],"x":true} ` + "\n"))
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
			req, err := DecodeRequest([]byte(doc))
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
