package mcp

import (
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/toolgate/toolgate/internal/httploop"
)

// defaultAuthRecheck is how often a credential file is looked at again: a
// mounted Secret that is rotated is swapped in place by kubelet, and the
// sidecar should follow without a restart.
const defaultAuthRecheck = 10 * time.Second

// mcpAuth is one upstream's credential header, re-read from its file when
// the file changes. A rotated file that no longer holds a header line is
// refused (logged) and the last good header is kept.
type mcpAuth struct {
	file    string
	recheck time.Duration
	log     *slog.Logger

	cur       atomic.Pointer[authHeader]
	checkedAt atomic.Int64 // monotonic nanoseconds (MonoNow)
	mu        sync.Mutex   // one re-read at a time
	modTime   time.Time
	size      int64
}

type authHeader struct{ name, value string }

func newMCPAuth(file string, name, value string, recheck time.Duration) *mcpAuth {
	a := &mcpAuth{file: file, recheck: recheck}
	if a.recheck <= 0 {
		a.recheck = defaultAuthRecheck
	}
	if fi, err := os.Stat(file); err == nil {
		a.modTime, a.size = fi.ModTime(), fi.Size()
	}
	a.cur.Store(&authHeader{name, value})
	a.checkedAt.Store(httploop.MonoNow())
	return a
}

// apply replaces the client's header of that name with the credential.
func (a *mcpAuth) apply(h http.Header) {
	hdr := a.current()
	h.Del(hdr.name)
	h[hdr.name] = []string{hdr.value}
}

func (a *mcpAuth) current() *authHeader {
	now := httploop.MonoNow()
	if last := a.checkedAt.Load(); now-last < int64(a.recheck) || !a.checkedAt.CompareAndSwap(last, now) {
		return a.cur.Load()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	fi, err := os.Stat(a.file)
	if err != nil {
		a.logf("the MCP upstream credential file cannot be read; keeping the last good header", "err", err)
		return a.cur.Load()
	}
	if fi.ModTime().Equal(a.modTime) && fi.Size() == a.size {
		return a.cur.Load()
	}
	name, value, err := readAuthHeader(a.file)
	if err != nil {
		a.logf("the MCP upstream credential file changed and is not a header line; keeping the last good header", "err", err)
		return a.cur.Load()
	}
	a.modTime, a.size = fi.ModTime(), fi.Size()
	next := &authHeader{name, value}
	a.cur.Store(next)
	if a.log != nil {
		a.log.Info("MCP upstream credential re-read", "file", a.file, "header", name)
	}
	return next
}

func (a *mcpAuth) logf(msg string, args ...any) {
	if a.log != nil {
		a.log.Error(msg, append([]any{"file", a.file}, args...)...)
	}
}
