package mcp

import (
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/textproto"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/net/http/httpguts"

	"github.com/toolgate/toolgate/internal/httploop"
)

// DefaultListen is where the MCP proxy listens when --mcp-upstream is
// given without --mcp-listen: beside the decision port, loopback only.
const DefaultListen = "127.0.0.1:8182"

// maxAuthFileBytes bounds an --mcp-upstream-auth file: one header line.
const maxAuthFileBytes = 16 << 10

// Options configure the MCP proxy: off when Upstreams is empty.
type Options struct {
	// Upstreams are NAME=URL: the MCP server at URL is served at
	// /mcp/NAME, every tools/call decided before it is forwarded.
	Upstreams []string
	// Listen is the proxy's address (host:port or unix:/path).
	Listen string
	// UpstreamAuth are NAME=FILE: FILE holds one header line (e.g.
	// "Authorization: Bearer ...") added to every request to NAME's
	// upstream, so the credential lives in the sidecar, never the agent.
	UpstreamAuth []string
	// MaxResultBytes is the most of a tools/call answer held to judge its
	// results (--max-result-bytes; DefaultMaxResultBytes when 0).
	MaxResultBytes int

	// OnListen, when set, is told the proxy's bound address (tests listen
	// on port 0).
	OnListen func(net.Addr)
	// AuthRecheck is how often credential files are looked at again
	// (defaultAuthRecheck when 0; tests shorten it).
	AuthRecheck time.Duration
	// UpstreamRoots, when set, are the only CAs an https upstream's
	// certificate may chain to (tests trust their own upstream's); nil:
	// the system's.
	UpstreamRoots *x509.CertPool
}

// AddFlags registers --mcp-upstream, --mcp-listen, --mcp-upstream-auth and
// --max-result-bytes.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&o.Upstreams, "mcp-upstream", o.Upstreams, "NAME=URL: proxy the MCP server (Streamable HTTP) at URL on --mcp-listen at /mcp/NAME, deciding every tools/call before it is forwarded (repeatable)")
	fs.StringVar(&o.Listen, "mcp-listen", o.Listen, "address the MCP proxy serves /mcp/NAME on: host:port or unix:/path (only with --mcp-upstream)")
	fs.IntVar(&o.MaxResultBytes, "max-result-bytes", o.MaxResultBytes, "bytes of a tools/call answer the MCP proxy holds to judge its result when the bundle has result rules (from 1 KiB to 1 GiB); past it the result is judged on what was held as if every condition on its text matched, and withheld if that denies or redacts it")
	fs.StringArrayVar(&o.UpstreamAuth, "mcp-upstream-auth", o.UpstreamAuth, "NAME=FILE: add the header line in FILE (e.g. \"Authorization: Bearer ...\") to every request to upstream NAME, replacing any the agent sent (repeatable)")
}

// Check checks the MCP flags (every upstream and credential parses).
func (o *Options) Check() error {
	_, err := o.parse()
	return err
}

// mcpUpstream is one parsed --mcp-upstream, with its credential header.
type mcpUpstream struct {
	name string
	url  *url.URL
	// raw is the URL as given: what a namespace that registers its
	// upstreams must have registered under name (decide.State.CheckUpstream).
	raw string
	// auth is the credential header (nil without --mcp-upstream-auth);
	// its value is never logged.
	auth *mcpAuth
}

// upstreamName is what fits a URL path segment and a metric label.
var upstreamName = regexp.MustCompile(`^[a-z0-9]([a-z0-9_.-]{0,61}[a-z0-9])?$`)

// parse reads the flags: every upstream with its credential, all problems
// at once, each naming its flag.
func (o *Options) parse() ([]mcpUpstream, error) {
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(o.Upstreams) == 0 {
		if len(o.UpstreamAuth) > 0 {
			add("--mcp-upstream-auth needs --mcp-upstream")
		}
		return nil, errors.Join(errs...)
	}
	if err := httploop.CheckAddr(o.Listen); err != nil {
		add("--mcp-listen: %v", err)
	}
	var ups []mcpUpstream
	index := map[string]int{}
	for _, kv := range o.Upstreams {
		name, raw, ok := strings.Cut(kv, "=")
		switch {
		case !ok:
			add("--mcp-upstream %q is not NAME=URL", kv)
			continue
		case !upstreamName.MatchString(name):
			add("--mcp-upstream %q: NAME %q must be 1-63 lowercase letters, digits, '-', '_' or '.', starting and ending with a letter or digit", kv, name)
			continue
		}
		if _, dup := index[name]; dup {
			add("--mcp-upstream: NAME %q is given twice", name)
			continue
		}
		u, err := parseUpstreamURL(raw)
		if err != nil {
			add("--mcp-upstream %s: %v", name, err)
			continue
		}
		index[name] = len(ups)
		ups = append(ups, mcpUpstream{name: name, url: u, raw: raw})
	}
	seenAuth := map[string]bool{}
	for _, kv := range o.UpstreamAuth {
		name, file, ok := strings.Cut(kv, "=")
		if !ok || file == "" {
			add("--mcp-upstream-auth %q is not NAME=FILE", kv)
			continue
		}
		i, known := index[name]
		switch {
		case !known:
			add("--mcp-upstream-auth %s: no --mcp-upstream is named %q", kv, name)
			continue
		case seenAuth[name]:
			add("--mcp-upstream-auth: NAME %q is given twice", name)
			continue
		}
		seenAuth[name] = true
		hname, hvalue, err := readAuthHeader(file)
		if err != nil {
			add("--mcp-upstream-auth %s: %v", name, err)
			continue
		}
		ups[i].auth = newMCPAuth(file, hname, hvalue, o.AuthRecheck)
	}
	return ups, errors.Join(errs...)
}

func parseUpstreamURL(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, err
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("%q: scheme must be http or https", raw)
	case u.Host == "":
		return nil, fmt.Errorf("%q has no host", raw)
	case u.User != nil:
		return nil, fmt.Errorf("%q carries credentials in the URL; put them in --mcp-upstream-auth", u.Redacted())
	case u.Fragment != "":
		return nil, fmt.Errorf("%q has a fragment", raw)
	}
	return u, nil
}

// readAuthHeader reads FILE's one header line, "Name: value". A trailing
// newline is allowed (Secrets are often written with one); anything else
// is refused rather than guessed at, and the value is never echoed.
func readAuthHeader(file string) (name, value string, err error) {
	f, err := os.Open(file)
	if err != nil {
		return "", "", err
	}
	defer func() { _ = f.Close() }()
	buf := make([]byte, maxAuthFileBytes+1)
	n, _ := f.Read(buf)
	if n > maxAuthFileBytes {
		return "", "", fmt.Errorf("%s is more than %d bytes; it should hold one header line", file, maxAuthFileBytes)
	}
	line := strings.TrimSuffix(strings.TrimSuffix(string(buf[:n]), "\n"), "\r")
	if strings.ContainsAny(line, "\r\n") {
		return "", "", fmt.Errorf("%s holds more than one line; it should hold one header line such as \"Authorization: Bearer ...\"", file)
	}
	name, value, ok := strings.Cut(line, ":")
	value = strings.TrimSpace(value)
	switch {
	case !ok || name == "":
		return "", "", fmt.Errorf("%s is not a header line \"Name: value\" such as \"Authorization: Bearer ...\"", file)
	case !httpguts.ValidHeaderFieldName(name):
		return "", "", fmt.Errorf("%s: %q is not a valid header name", file, name)
	case value == "":
		return "", "", fmt.Errorf("%s: header %s has an empty value", file, name)
	case !httpguts.ValidHeaderFieldValue(value):
		return "", "", fmt.Errorf("%s: the value of header %s holds characters a header cannot carry", file, name)
	}
	name = textproto.CanonicalMIMEHeaderKey(name)
	if reservedUpstreamHeader(name) {
		return "", "", fmt.Errorf("%s: header %s is part of the MCP transport or HTTP framing; a credential header cannot replace it", file, name)
	}
	return name, value, nil
}

// reservedUpstreamHeader are headers the transport itself carries: a
// credential file setting one would corrupt every request, or smuggle.
func reservedUpstreamHeader(canonical string) bool {
	switch canonical {
	case "Host", "Content-Length", "Content-Type", "Transfer-Encoding", "Connection", "Accept",
		"Mcp-Session-Id", "Mcp-Protocol-Version", "Mcp-Method", "Mcp-Name", "Last-Event-Id":
		return true
	}
	return strings.HasPrefix(canonical, "Mcp-Param-")
}
