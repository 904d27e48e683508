package httploop

import (
	"bufio"
	"bytes"
	"net/http"
	"testing"
)

// writeHeader must write what http.Header.Write writes, for the one-name
// headers it writes itself and the others it hands over.
func TestWriteHeaderMatchesHeaderWrite(t *testing.T) {
	cases := []http.Header{
		{},
		{"Content-Type": {"application/json"}},
		{"Content-Type": {"  padded\t "}},
		{"X-Multi": {"a", "b", ""}},
		{"X-Split": {"one\r\ntwo\nthree\rfour"}},
		{"Bad Name": {"dropped"}},
		{"Bad\r\nName": {"x"}},
		{"X-Empty": {}},
		{"B": {"2"}, "A": {"1"}, "C": {"3", "4"}},
	}
	for _, h := range cases {
		var want bytes.Buffer
		if err := h.Write(&want); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		bw := bufio.NewWriter(&got)
		if err := writeHeader(bw, h); err != nil {
			t.Fatalf("%v: %v", h, err)
		}
		if err := bw.Flush(); err != nil {
			t.Fatal(err)
		}
		if got.String() != want.String() {
			t.Errorf("header %q: wrote %q, http.Header.Write writes %q", h, got.String(), want.String())
		}
	}
}

// A failed connection is reported, as Header.Write reports it.
func TestWriteHeaderReportsWriteError(t *testing.T) {
	bw := bufio.NewWriterSize(failingWriter{}, 16)
	err := writeHeader(bw, http.Header{"Content-Type": {"application/json; a value longer than the buffer"}})
	if err == nil {
		t.Fatal("writeHeader on a failing connection returned no error")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errWriteFailed }

var errWriteFailed = bytes.ErrTooLarge
