package decide

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"testing"
)

// readBody asks reserve for every capacity before it allocates it, grows a
// declared length in one step, sees the end of a body that fills the buffer
// at its limit, and stops at a refusal with what it had.
func TestReadBodyReservesBeforeGrowing(t *testing.T) {
	var probe [1]byte
	for _, tc := range []struct {
		name        string
		body, size  int
		allow       int // the largest capacity reserve grants
		wantReserve []int
		wantErr     error
	}{
		{"empty, declared", 0, 0, 0, nil, nil},
		{"small, unknown length", 600, -1, 1 << 20, []int{512, 1024}, nil},
		{"declared length in one step", 300 << 10, 300 << 10, 1 << 20, []int{300 << 10}, nil},
		{"unknown length up to the limit", 1 << 20, -1, 1 << 20, []int{512, 1 << 10, 2 << 10, 4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20}, nil},
		{"refused growth", 200 << 10, -1, 128 << 10, []int{512, 1 << 10, 2 << 10, 4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10, 128 << 10, 256 << 10}, ErrBodyBudget},
		{"refused declared length", 1 << 20, 1 << 20, 512 << 10, []int{1 << 20}, ErrBodyBudget},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked []int
			reserve := func(newCap int) bool { asked = append(asked, newCap); return newCap <= tc.allow }
			limit := MaxRequestBytes
			if tc.size >= 0 {
				limit = tc.size
			}
			in := bytes.Repeat([]byte{'x'}, tc.body)
			got, err := readBody(nil, io.LimitReader(bytes.NewReader(in), int64(tc.body)), tc.size, limit, probe[:], reserve)
			if err != tc.wantErr {
				t.Fatalf("error %v, want %v", err, tc.wantErr)
			}
			if fmt.Sprint(asked) != fmt.Sprint(tc.wantReserve) {
				t.Errorf("reserved %v, want %v", asked, tc.wantReserve)
			}
			if err == nil && !bytes.Equal(got, in) {
				t.Errorf("read %d bytes of %d", len(got), len(in))
			}
			if err != nil && cap(got) > tc.allow {
				t.Errorf("a buffer of %d bytes was allocated past the grant of %d", cap(got), tc.allow)
			}
		})
	}
	// Past the limit, the reader refuses, not readBody.
	_, err := readBody(nil, http.MaxBytesReader(nil, io.NopCloser(bytes.NewReader(make([]byte, MaxRequestBytes+1))), MaxRequestBytes),
		-1, MaxRequestBytes, probe[:], func(int) bool { return true })
	if tooBig := (*http.MaxBytesError)(nil); !errors.As(err, &tooBig) {
		t.Errorf("a body one byte past the limit: %v", err)
	}
}
