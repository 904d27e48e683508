package endpoint

import (
	"strings"
	"testing"
)

func TestParseUnix(t *testing.T) {
	for _, tc := range []struct {
		addr, path string
		isUnix     bool
		err        string
	}{
		{"127.0.0.1:8181", "", false, ""},
		{"http://127.0.0.1:8181", "", false, ""},
		{"unix:/run/tg.sock", "/run/tg.sock", true, ""},
		{"unix:run/tg.sock", "run/tg.sock", true, ""},
		{"unix:///run/tg.sock", "/run/tg.sock", true, ""},
		{UnixURL(DefaultSocket), DefaultSocket, true, ""},
		{"unix://host/run/tg.sock", "", true, "names a host"},
		{"unix://", "", true, "names a host"},
		{"unix:", "", true, "names no socket path"},
	} {
		path, isUnix, err := ParseUnix(tc.addr)
		if path != tc.path || isUnix != tc.isUnix || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("ParseUnix(%q) = %q, %v, %v; want %q, %v, an error with %q", tc.addr, path, isUnix, err, tc.path, tc.isUnix, tc.err)
		}
	}
}

func TestSocketPathFitsASocketAddress(t *testing.T) {
	fits := "/" + strings.Repeat("s", MaxSocketPath-1)
	if path, _, err := SocketPath("unix:" + fits); err != nil || path != fits {
		t.Errorf("a %d-byte path: %q, %v", MaxSocketPath, path, err)
	}
	if _, isUnix, err := SocketPath("unix:" + fits + "s"); !isUnix || err == nil || !strings.Contains(err.Error(), "more than the 107") {
		t.Errorf("a %d-byte path: %v", MaxSocketPath+1, err)
	}
	if _, _, err := SocketPath("unix:/run/a\x00b"); err == nil || !strings.Contains(err.Error(), "NUL") {
		t.Errorf("a NUL byte: %v", err)
	}
	if _, isUnix, err := SocketPath("localhost:1"); isUnix || err != nil {
		t.Errorf("host:port: %v, %v", isUnix, err)
	}
}
