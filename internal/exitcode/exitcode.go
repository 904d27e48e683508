// Package exitcode is how toolgate's commands end the process: the exit
// codes they share and the error that carries one from a command's RunE to
// main. It is a leaf, so every command package (cli, freeze) can use it
// without importing another.
package exitcode

import (
	"errors"
	"fmt"
)

// Exit codes shared by every command.
const (
	// Problems: the input was read and found wrong (validate), or the
	// cluster did not do what was asked (freeze).
	Problems = 1
	// Usage: the command could not run: bad flags, unreadable or
	// malformed input.
	Usage = 2
)

// Error makes a command end the process with Code. A nil Err means the
// command already printed what the user needs to know.
type Error struct {
	Code int
	Err  error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Usagef is an Error with code Usage.
func Usagef(format string, args ...any) error {
	return &Error{Code: Usage, Err: fmt.Errorf(format, args...)}
}

// Problemsf is an Error with code Problems.
func Problemsf(format string, args ...any) error {
	return &Error{Code: Problems, Err: fmt.Errorf(format, args...)}
}

// Of is the process exit code for what a command returned: 0 for nil, the
// Error's code, or 1 for any other error.
func Of(err error) int {
	if err == nil {
		return 0
	}
	var ee *Error
	if errors.As(err, &ee) {
		return ee.Code
	}
	return 1
}
