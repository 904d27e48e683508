package redisstore

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// DefaultTimeout bounds every operation on the store (dial, write, read,
// and the caller's context): a call under a shared limit waits no longer
// than this for its count before it is denied USAGE_UNAVAILABLE.
const DefaultTimeout = 50 * time.Millisecond

// DefaultCluster is the key prefix's cluster name when Config.Cluster is
// empty (the sidecar's --cluster-name default).
const DefaultCluster = "default"

// maxDB is the highest DB index a URL may name: Redis has 16 databases
// (0-15) unless configured otherwise.
const maxDB = 15

// Config says which Redis to count in and how.
type Config struct {
	// URL is redis://[USER@]HOST[:PORT][/DB] or rediss:// for TLS; PORT
	// defaults to 6379 and DB (0-15) to 0. A password in the URL is
	// refused: it belongs in PasswordFile.
	URL string
	// PasswordFile holds the password (one trailing newline is dropped),
	// for AUTH (with the URL's user for an ACL user).
	PasswordFile string
	// CAFile is a PEM bundle the server's certificate must chain to
	// (rediss:// only; the system's roots when empty).
	CAFile string
	// Timeout bounds each operation (DefaultTimeout when 0).
	Timeout time.Duration
	// Cluster and Namespace prefix every key: one namespace's counters are
	// shared by its sidecars, never with another namespace or cluster
	// using the same Redis. Cluster defaults to DefaultCluster.
	Cluster   string
	Namespace string
}

// endpoint is a parsed URL.
type endpoint struct {
	addr     string // host:port
	host     string
	username string
	db       int
	tls      bool
}

// parseURL reads a redis:// or rediss:// URL. Its errors never quote the
// URL itself: a URL with a password in it must not end up in a log.
func parseURL(raw string) (endpoint, error) {
	var e endpoint
	if raw == "" {
		return e, errors.New("no URL: want redis://HOST:PORT/DB or rediss://HOST:PORT/DB")
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Parse's errors quote parts of the URL: only their kind is said.
		why := "malformed"
		switch msg := err.Error(); {
		case strings.Contains(msg, "invalid port"):
			why = "the port is not a number"
		case strings.Contains(msg, "invalid character") || strings.Contains(msg, "invalid URL escape"):
			why = "an invalid character or escape"
		case strings.Contains(msg, "userinfo"):
			why = "an invalid user"
		}
		return e, fmt.Errorf("not a URL (%s): want redis://HOST:PORT/DB", why)
	}
	switch u.Scheme {
	case "redis":
	case "rediss":
		e.tls = true
	case "":
		return e, errors.New("no scheme: want redis://HOST:PORT/DB or rediss:// for TLS")
	default:
		return e, fmt.Errorf("unknown scheme %q: want redis:// or rediss:// (TLS)", u.Scheme)
	}
	if u.Opaque != "" {
		return e, errors.New("want redis://HOST:PORT/DB (with the two slashes)")
	}
	if u.User != nil {
		if _, set := u.User.Password(); set {
			return e, errors.New("the URL holds a password: put the password in a file: --usage-store-password-file")
		}
		e.username = u.User.Username()
	}
	if u.RawQuery != "" || u.ForceQuery {
		return e, errors.New("query parameters are not supported: use --usage-store-password-file, --usage-store-ca-file and --usage-store-timeout")
	}
	if u.Fragment != "" || strings.Contains(raw, "#") {
		return e, errors.New("a fragment (#...) is not allowed in the URL")
	}
	e.host = u.Hostname()
	if e.host == "" {
		return e, errors.New("no host: want redis://HOST:PORT/DB")
	}
	port := 6379
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return e, fmt.Errorf("port %q is not a port number (1-65535)", p)
		}
		port = n
	} else if strings.HasSuffix(u.Host, ":") {
		return e, errors.New("empty port after the host: want HOST:PORT")
	}
	e.addr = net.JoinHostPort(e.host, strconv.Itoa(port))
	if db := strings.TrimPrefix(u.Path, "/"); db != "" {
		n, err := strconv.Atoi(db)
		if err != nil || strings.Trim(db, "0123456789") != "" {
			return e, fmt.Errorf("DB %q is not a number: want /0 to /%d after HOST:PORT", db, maxDB)
		}
		if n > maxDB {
			return e, fmt.Errorf("DB %d is out of range: want 0 to %d", n, maxDB)
		}
		e.db = n
	}
	return e, nil
}

// readPassword reads a password file: its content, less one trailing
// newline. An empty or unreadable file is an error (a password meant but
// not found must not turn into no password).
func readPassword(path string) (string, error) {
	if path == "" {
		return "", nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("password file: %w", err)
	}
	s := string(b)
	if t, ok := strings.CutSuffix(s, "\n"); ok {
		s = strings.TrimSuffix(t, "\r")
	}
	if s == "" {
		return "", fmt.Errorf("password file %s is empty", path)
	}
	return s, nil
}

// tlsConfig is the TLS configuration for rediss://: the server's name
// checked against its certificate, chained to caFile's certificates when
// given (else to the system's roots).
func tlsConfig(e endpoint, caFile string) (*tls.Config, error) {
	if !e.tls {
		if caFile != "" {
			return nil, errors.New("--usage-store-ca-file needs a rediss:// URL (TLS)")
		}
		return nil, nil
	}
	c := &tls.Config{ServerName: e.host, MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CA file %s holds no PEM certificate", caFile)
		}
		c.RootCAs = pool
	}
	return c, nil
}

// nameRE is what a cluster or namespace name may be in a key: letters,
// digits, '.', '_' and '-' (DNS labels and the like), so the key's hash tag
// {cluster/namespace} cannot be confused.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,252}$`)

func checkName(what, s string) error {
	if !nameRE.MatchString(s) {
		return fmt.Errorf("%s %q: want letters, digits, '.', '_' or '-' (at most 253)", what, s)
	}
	return nil
}

// validate fills in defaults and checks c, returning what Open needs.
func (c *Config) validate() (endpoint, string, *tls.Config, error) {
	e, err := parseURL(c.URL)
	if err != nil {
		return e, "", nil, fmt.Errorf("--usage-store: %w", err)
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Timeout < 0 {
		return e, "", nil, fmt.Errorf("--usage-store-timeout %s: must be positive", c.Timeout)
	}
	if c.Cluster == "" {
		c.Cluster = DefaultCluster
	}
	if err := checkName("cluster name", c.Cluster); err != nil {
		return e, "", nil, err
	}
	if err := checkName("namespace", c.Namespace); err != nil {
		return e, "", nil, err
	}
	pw, err := readPassword(c.PasswordFile)
	if err != nil {
		return e, "", nil, fmt.Errorf("--usage-store-password-file: %w", err)
	}
	if e.username != "" && pw == "" {
		return e, "", nil, fmt.Errorf("--usage-store names the user %q but no --usage-store-password-file", e.username)
	}
	tc, err := tlsConfig(e, c.CAFile)
	if err != nil {
		return e, "", nil, err
	}
	return e, pw, tc, nil
}

// CheckURL reads raw as Open does and tells whether it asks for TLS: the
// sidecar's and the manager's flag checks read the URL here, so a URL one
// accepts the other never refuses.
func CheckURL(raw string) (tls bool, err error) {
	e, err := parseURL(raw)
	return e.tls, err
}
