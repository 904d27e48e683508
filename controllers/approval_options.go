package controllers

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"strings"
	"time"
)

// DefaultApprovalRetention is how long a finished ApprovalRequest (expired,
// denied or consumed) stays for `kubectl get` and audit before the
// operator deletes it.
const DefaultApprovalRetention = 24 * time.Hour

// Notice delivery defaults: five attempts, one second apart and doubling
// (1+2+4+8 s of waiting), fit well within the shortest sensible approval
// timeout; a receiver down for longer than that is told by the failures
// metric, not by a notice hours late.
const (
	defaultNotifyAttempts  = 5
	defaultNotifyBackoff   = time.Second
	defaultNotifyTimeout   = 10 * time.Second
	defaultNotifyQueueSize = 256
	defaultNotifyWorkers   = 2
)

// ApprovalOptions configure the ApprovalRequest controller: who is told of
// a new request, and when finished requests go.
type ApprovalOptions struct {
	// Retention is how long after a request expired, was denied or was
	// consumed it is deleted; DefaultApprovalRetention when zero.
	Retention time.Duration
	// NotifyURL, when set, receives a JSON notice (Notice) by POST for each
	// new request: http or https, absolute.
	NotifyURL string
	// NotifyAuthHeaderFile, when set, holds the value of the notices'
	// Authorization header (a mounted Secret key, such as "Bearer ...").
	// It is read again for every notice, so a rotated Secret applies
	// without a restart.
	NotifyAuthHeaderFile string
	// NotifyAttempts bounds the POSTs per notice (5 when zero); they stop
	// earlier when the request expires.
	NotifyAttempts int
	// NotifyBackoff is the wait before the second attempt, doubled before
	// each next one (1s when zero).
	NotifyBackoff time.Duration
	// NotifyTimeout bounds each POST (10s when zero).
	NotifyTimeout time.Duration
	// NotifyQueueSize bounds the notices waiting to be sent (256 when
	// zero); past it a notice is dropped and counted, never waited for.
	NotifyQueueSize int
}

func (o ApprovalOptions) withDefaults() ApprovalOptions {
	if o.Retention == 0 {
		o.Retention = DefaultApprovalRetention
	}
	if o.NotifyAttempts == 0 {
		o.NotifyAttempts = defaultNotifyAttempts
	}
	if o.NotifyBackoff == 0 {
		o.NotifyBackoff = defaultNotifyBackoff
	}
	if o.NotifyTimeout == 0 {
		o.NotifyTimeout = defaultNotifyTimeout
	}
	if o.NotifyQueueSize == 0 {
		o.NotifyQueueSize = defaultNotifyQueueSize
	}
	return o
}

// Validate reports approval options that cannot work. It does not read
// the auth header file: that happens when the controller starts (Setup),
// where the file is mounted.
func (o ApprovalOptions) Validate() error {
	var errs []error
	if o.Retention < 0 {
		errs = append(errs, fmt.Errorf("retention %s is negative", o.Retention))
	}
	if o.NotifyURL != "" {
		if err := ValidateNotifyURL(o.NotifyURL); err != nil {
			errs = append(errs, err)
		}
	} else if o.NotifyAuthHeaderFile != "" {
		errs = append(errs, errors.New("an auth header file without a notify URL: nothing would use it"))
	}
	if o.NotifyAttempts < 0 || o.NotifyBackoff < 0 || o.NotifyTimeout < 0 || o.NotifyQueueSize < 0 {
		errs = append(errs, errors.New("notify attempts, backoff, timeout and queue size must not be negative"))
	}
	return errors.Join(errs...)
}

// ValidateNotifyURL accepts an absolute http or https URL with a host and
// without credentials: a password in the URL would be printed wherever the
// flags are (the Deployment, logs); it belongs in the auth header file.
func ValidateNotifyURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("notify URL %q does not parse: %w", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("notify URL %q: the scheme must be http or https", raw)
	}
	if u.Host == "" || u.Hostname() == "" {
		return fmt.Errorf("notify URL %q has no host", raw)
	}
	if u.User != nil {
		return fmt.Errorf("notify URL %q carries credentials: put them in the auth header file instead", raw)
	}
	return nil
}

// readAuthHeader reads the Authorization header value from path, without
// its trailing newline. An empty value, or one spanning lines, is refused:
// it would send a header the receiver cannot mean.
func readAuthHeader(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("notify auth header file: %w", err)
	}
	v := strings.TrimRight(string(b), "\r\n")
	if strings.TrimSpace(v) == "" {
		return "", fmt.Errorf("notify auth header file %s is empty", path)
	}
	if strings.ContainsAny(v, "\r\n") {
		return "", fmt.Errorf("notify auth header file %s holds more than one line: it must hold one header value", path)
	}
	return v, nil
}
