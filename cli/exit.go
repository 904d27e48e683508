package cli

import (
	"errors"
	"fmt"
)

// Exit codes shared by every command.
const (
	// ExitProblems: the input was read and found wrong (validate).
	ExitProblems = 1
	// ExitUsage: the command could not run: bad flags, unreadable or
	// malformed input.
	ExitUsage = 2
)

// ExitError makes a command end the process with Code. A nil Err means the
// command already printed what the user needs to know.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

func (e *ExitError) Unwrap() error { return e.Err }

func usageErrorf(format string, args ...any) error {
	return &ExitError{Code: ExitUsage, Err: fmt.Errorf(format, args...)}
}

// ExitCode is the process exit code for what a command returned: 0 for nil,
// the ExitError's code, or 1 for any other error.
func ExitCode(err error) int {
	if err == nil {
		return 0
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		return ee.Code
	}
	return 1
}
