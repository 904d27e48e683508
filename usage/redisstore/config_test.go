package redisstore

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestParseURLRefusesMalformedURLs: every malformed --usage-store value is
// refused with an error saying what is wrong, and never repeats a password
// written into the URL.
func TestParseURLRefusesMalformedURLs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ url, want string }{
		{"", "no URL"},
		{"localhost:6379", `unknown scheme "localhost"`},
		{"http://localhost:6379/0", `unknown scheme "http"`},
		{"//localhost:6379/0", "no scheme"},
		{"redis:localhost", "with the two slashes"},
		{"redis://:hunter2@localhost:6379/0", "put the password in a file: --usage-store-password-file"},
		{"redis://alice:hunter2@localhost/0", "put the password in a file"},
		{"redis://localhost:6379/0?password=hunter2", "query parameters are not supported"},
		{"redis://localhost:6379/0?", "query parameters are not supported"},
		{"redis://localhost:6379/0#x", "fragment"},
		{"redis:///0", "no host"},
		{"redis://:6379/0", "no host"},
		{"redis://localhost:0/0", `port "0" is not a port number`},
		{"redis://localhost:65536/0", `port "65536" is not a port number`},
		{"redis://localhost:abc/0", "not a URL (the port is not a number)"},
		{"redis://%zz/0", "not a URL (an invalid character or escape)"},
		{"redis://localhost:/0", "empty port"},
		{"redis://local host/0", "not a URL (an invalid character or escape)"},
		{"redis://localhost:6379/x", `DB "x" is not a number`},
		{"redis://localhost:6379/-1", `DB "-1" is not a number`},
		{"redis://localhost:6379/+1", `DB "+1" is not a number`},
		{"redis://localhost:6379/1/2", `DB "1/2" is not a number`},
		{"redis://localhost:6379/16", "DB 16 is out of range: want 0 to 15"},
		{"redis://localhost:6379/99999999999999999999", "is not a number"},
	} {
		_, err := parseURL(tc.url)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want an error with %q", tc.url, err, tc.want)
			continue
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%q: the error repeats the password: %v", tc.url, err)
		}
	}
}

func TestParseURLReadsValidURLs(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url  string
		want endpoint
	}{
		{"redis://localhost:6379/3", endpoint{addr: "localhost:6379", host: "localhost", db: 3}},
		{"redis://127.0.0.1", endpoint{addr: "127.0.0.1:6379", host: "127.0.0.1"}},
		{"redis://127.0.0.1/", endpoint{addr: "127.0.0.1:6379", host: "127.0.0.1"}},
		{"REDIS://localhost:7000/15", endpoint{addr: "localhost:7000", host: "localhost", db: 15}},
		{"rediss://alice@localhost/0", endpoint{addr: "localhost:6379", host: "localhost", username: "alice", tls: true}},
		{"redis://[::1]:6380/1", endpoint{addr: "[::1]:6380", host: "::1", db: 1}},
	} {
		got, err := parseURL(tc.url)
		if err != nil || got != tc.want {
			t.Errorf("%q: %+v %v, want %+v", tc.url, got, err, tc.want)
		}
	}
}

// TestConfigRefusesWhatItCannotUse: unreadable or empty password files, a
// CA file without TLS or without certificates, bad names and timeouts are
// errors at Open, before any connection.
func TestConfigRefusesWhatItCannotUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	empty, newline, notPEM := file("empty", ""), file("newline", "\n"), file("ca.txt", "not a certificate")
	ok := Config{URL: "redis://localhost:6379/0", Namespace: "agents"}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"missing password file", func(c *Config) { c.PasswordFile = filepath.Join(dir, "none") }, "--usage-store-password-file: password file: open"},
		{"empty password file", func(c *Config) { c.PasswordFile = empty }, "is empty"},
		{"a newline only", func(c *Config) { c.PasswordFile = newline }, "is empty"},
		{"user without password", func(c *Config) { c.URL = "redis://alice@localhost/0" }, `names the user "alice" but no --usage-store-password-file`},
		{"CA without TLS", func(c *Config) { c.CAFile = notPEM }, "needs a rediss:// URL"},
		{"CA not PEM", func(c *Config) { c.URL, c.CAFile = "rediss://localhost/0", notPEM }, "holds no PEM certificate"},
		{"CA missing", func(c *Config) { c.URL, c.CAFile = "rediss://localhost/0", filepath.Join(dir, "none") }, "CA file: open"},
		{"no namespace", func(c *Config) { c.Namespace = "" }, `namespace ""`},
		{"brace in namespace", func(c *Config) { c.Namespace = "a}b" }, `namespace "a}b"`},
		{"slash in cluster", func(c *Config) { c.Cluster = "a/b" }, `cluster name "a/b"`},
		{"negative timeout", func(c *Config) { c.Timeout = -time.Second }, "must be positive"},
		{"bad URL", func(c *Config) { c.URL = "redis://localhost:6379/x" }, `--usage-store: DB "x" is not a number`},
	} {
		c := ok
		tc.edit(&c)
		_, _, _, err := c.validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
	c := ok
	if _, _, _, err := c.validate(); err != nil || c.Timeout != DefaultTimeout || c.Cluster != DefaultCluster {
		t.Errorf("defaults: %v, timeout %s, cluster %q", err, c.Timeout, c.Cluster)
	}
}

// TestPasswordFileLosesOneTrailingNewline: a Secret written with echo ends
// in a newline that is not part of the password; anything else is.
func TestPasswordFileLosesOneTrailingNewline(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for content, want := range map[string]string{
		"pw": "pw", "pw\n": "pw", "pw\r\n": "pw", "pw\n\n": "pw\n", " pw ": " pw ",
	} {
		p := filepath.Join(dir, "pw")
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		if got, err := readPassword(p); got != want || err != nil {
			t.Errorf("%q: %q %v, want %q", content, got, err, want)
		}
	}
}

// FuzzParseURL: whatever the URL, parsing does not panic, an error never
// repeats the URL's password, and a URL accepted has a host and a DB in
// range.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"redis://localhost:6379/0", "rediss://alice@localhost/15", "redis://:secret-9@localhost/0",
		"redis://u:secret-9@[::1]:1/2?x=1", "redis://localhost:6379/16", "redis://%zz/0", "redis://local host/0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		e, err := parseURL(raw)
		if err != nil {
			u, perr := url.Parse(raw)
			if perr != nil && !strings.HasPrefix(err.Error(), "not a URL (") {
				t.Fatalf("%q: %v, want a fixed message for what url.Parse refused", raw, err)
			}
			if perr == nil && u.User != nil {
				// The seeds' password is marked, so that it cannot be a
				// word of the messages themselves.
				if pw, _ := u.User.Password(); strings.Contains(pw, "secret-9") && strings.Contains(err.Error(), "secret-9") {
					t.Fatalf("%q: the error repeats the password: %v", raw, err)
				}
			}
			return
		}
		if e.host == "" || e.db < 0 || e.db > maxDB || e.addr == "" {
			t.Fatalf("%q accepted as %+v", raw, e)
		}
	})
}
