package redisstore

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"syscall"

	"github.com/redis/go-redis/v9"

	"github.com/toolgate/toolgate/usage"
)

// unavailable is a store failure: it wraps usage.ErrUnavailable (the
// decision core denies USAGE_UNAVAILABLE) and, for a timeout,
// context.DeadlineExceeded (errors.Is tells a timeout from other errors,
// for the requests metric). Its message says which server and what went
// wrong, never the password.
type unavailable struct {
	msg     string
	timeout bool
}

func (e *unavailable) Error() string { return e.msg }

func (e *unavailable) Is(target error) bool {
	return target == usage.ErrUnavailable || (e.timeout && target == context.DeadlineExceeded)
}

// fail turns a client error of op into an unavailable that says what
// happened: a timeout, a refused connection, a refused password, a
// script error or the server's own error.
func (s *Store) fail(caller context.Context, op string, err error) error {
	prefix := "redis " + s.addr + ": " + op + ": "
	var nerr net.Error
	switch {
	case caller.Err() != nil:
		// The caller's own deadline or cancellation came first.
		return &unavailable{msg: prefix + "the caller gave up: " + caller.Err().Error(), timeout: errors.Is(caller.Err(), context.DeadlineExceeded)}
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) ||
		(errors.As(err, &nerr) && nerr.Timeout()):
		return &unavailable{msg: prefix + "timed out after " + s.timeout.String(), timeout: true}
	case errors.Is(err, syscall.ECONNREFUSED):
		return &unavailable{msg: prefix + "connection refused"}
	case errors.Is(err, context.Canceled):
		return &unavailable{msg: prefix + "canceled"}
	case errors.Is(err, redis.ErrClosed):
		return &unavailable{msg: prefix + "the store is closed"}
	}
	msg := firstLine(err.Error())
	var rerr redis.Error
	switch {
	case isAuthError(msg):
		return &unavailable{msg: prefix + "authentication failed (" + msg + ")"}
	case errors.As(err, &rerr) && (strings.Contains(msg, "script") || strings.HasPrefix(msg, "NOSCRIPT")):
		return &unavailable{msg: prefix + "script error: " + msg}
	case errors.As(err, &rerr):
		return &unavailable{msg: prefix + "refused: " + msg}
	}
	return &unavailable{msg: prefix + "unreachable: " + msg}
}

// isAuthError tells the server's answers to a missing or wrong password
// (or ACL user).
func isAuthError(msg string) bool {
	for _, p := range []string{"NOAUTH", "WRONGPASS"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return strings.Contains(msg, "AUTH") && strings.Contains(msg, "without any password configured")
}

// firstLine keeps an error's first line, shortened: server errors may be
// long.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}
