package exitcode

import (
	"errors"
	"fmt"
	"testing"
)

func TestExitCode(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{errors.New("x"), 1},
		{&Error{Code: Problems}, 1},
		{&Error{Code: Usage, Err: errors.New("x")}, 2},
		{fmt.Errorf("wrapped: %w", &Error{Code: 3}), 3},
	} {
		if got := Of(tt.err); got != tt.want {
			t.Errorf("Of(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}
