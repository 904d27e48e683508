package request

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

// DecodeField reads a field as DecodeLimit reads it inside the
// request document, and refuses what it cannot read with the errors
// DecodeLimit gives: malformed JSON, trailing data, and too many
// values counted over the whole request.
func TestDecodeField(t *testing.T) {
	const args = `{"amount": 5000, "to": ["a", {"b": null}], "big": 1e300, "s": "\ud800x"}`
	want, err := DecodeLimit([]byte(`{"tool_name":"pay","input":`+args+`}`), 0)
	if err != nil {
		t.Fatal(err)
	}
	got := Request{FieldToolName: "pay"}
	if err := got.DecodeField(FieldInput, []byte(args), 0); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("built %#v\ndocument %#v", got, want)
	}
	// The document holds 10 values: the request, its tool_name, and 8 in input.
	for max, wantErr := range map[int]error{10: nil, 9: ErrTooManyElements, 2: ErrTooManyElements, 1: ErrTooManyElements} {
		r := Request{FieldToolName: "pay"}
		err := r.DecodeField(FieldInput, []byte(args), max)
		if !errors.Is(err, wantErr) || (wantErr == nil) != (err == nil) {
			t.Errorf("limit %d: %v, want %v", max, err, wantErr)
		}
		if err != nil && !strings.Contains(err.Error(), "the request holds more than") {
			t.Errorf("limit %d: %v does not speak of the request", max, err)
		}
		if err != nil && r[FieldInput] != nil {
			t.Errorf("limit %d: a refused field was kept: %v", max, r[FieldInput])
		}
	}
	for _, bad := range []string{``, `{`, `{"a":1} x`, `[1,]`, `nul`} {
		err := Request{FieldToolName: "x"}.DecodeField(FieldInput, []byte(bad), 0)
		if !errors.Is(err, ErrBadRequest) {
			t.Errorf("%q: %v, want a bad request", bad, err)
		}
	}
	if err := (Request{FieldToolName: "x", "a": "b"}).CheckLimit(2); !errors.Is(err, ErrTooManyElements) {
		t.Errorf("CheckLimit: %v", err)
	}
	if err := (Request{FieldToolName: "x", "a": "b"}).CheckLimit(3); err != nil {
		t.Errorf("CheckLimit: %v", err)
	}
}
