package mcp

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMCPOptionsParse(t *testing.T) {
	dir := t.TempDir()
	file := func(name, content string) string {
		p := filepath.Join(dir, name)
		must(t, os.WriteFile(p, []byte(content), 0o600))
		return p
	}
	good := file("good", "Authorization: Bearer s3cret\n")
	crlf := file("crlf", "X-Api-Key: k1\r\n")
	for _, c := range []struct {
		name string
		o    Options
		want []string // substrings of the error; none: valid
	}{
		{"off", Options{}, nil},
		{"one upstream", Options{Listen: DefaultListen, Upstreams: []string{"github=https://mcp.example.com/mcp"}}, nil},
		{"with credentials", Options{Listen: DefaultListen, Upstreams: []string{"github=https://x/mcp", "pay=http://127.0.0.1:9/mcp"},
			UpstreamAuth: []string{"github=" + good, "pay=" + crlf}}, nil},
		{"auth without upstream", Options{Listen: DefaultListen, UpstreamAuth: []string{"github=" + good}},
			[]string{"--mcp-upstream-auth needs --mcp-upstream"}},
		{"not NAME=URL", Options{Listen: DefaultListen, Upstreams: []string{"https://x/mcp"}}, []string{`--mcp-upstream "https://x/mcp" is not NAME=URL`}},
		{"bad name", Options{Listen: DefaultListen, Upstreams: []string{"Git Hub=https://x/mcp"}}, []string{`NAME "Git Hub" must be`}},
		{"twice", Options{Listen: DefaultListen, Upstreams: []string{"a=https://x/mcp", "a=https://y/mcp"}}, []string{`NAME "a" is given twice`}},
		{"scheme", Options{Listen: DefaultListen, Upstreams: []string{"a=ftp://x/mcp"}}, []string{"scheme must be http or https"}},
		{"no host", Options{Listen: DefaultListen, Upstreams: []string{"a=http:///mcp"}}, []string{"has no host"}},
		{"userinfo", Options{Listen: DefaultListen, Upstreams: []string{"a=https://u:pw@x/mcp"}}, []string{"carries credentials in the URL", "xxxxx"}},
		{"bad listen", Options{Listen: "nowhere", Upstreams: []string{"a=https://x/mcp"}}, []string{"--mcp-listen"}},
		{"auth for unknown", Options{Listen: DefaultListen, Upstreams: []string{"a=https://x/mcp"}, UpstreamAuth: []string{"b=" + good}},
			[]string{`no --mcp-upstream is named "b"`}},
		{"auth not NAME=FILE", Options{Listen: DefaultListen, Upstreams: []string{"a=https://x/mcp"}, UpstreamAuth: []string{"a"}},
			[]string{`"a" is not NAME=FILE`}},
		{"auth twice", Options{Listen: DefaultListen, Upstreams: []string{"a=https://x/mcp"}, UpstreamAuth: []string{"a=" + good, "a=" + good}},
			[]string{`NAME "a" is given twice`}},
		{"missing file", Options{Listen: DefaultListen, Upstreams: []string{"a=https://x/mcp"}, UpstreamAuth: []string{"a=" + filepath.Join(dir, "nope")}},
			[]string{"no such file"}},
		{"two lines", Options{Listen: DefaultListen, Upstreams: []string{"a=https://x/mcp"}, UpstreamAuth: []string{"a=" + file("two", "Authorization: Bearer x\nX-Other: y\n")}},
			[]string{"more than one line"}},
		{"no colon", Options{Listen: DefaultListen, Upstreams: []string{"a=https://x/mcp"}, UpstreamAuth: []string{"a=" + file("bare", "Bearer s3cret")}},
			[]string{"is not a header line"}},
		{"bad name in file", Options{Listen: DefaultListen, Upstreams: []string{"a=https://x/mcp"}, UpstreamAuth: []string{"a=" + file("sp", "Auth orization: x")}},
			[]string{"is not a valid header name"}},
		{"empty value", Options{Listen: DefaultListen, Upstreams: []string{"a=https://x/mcp"}, UpstreamAuth: []string{"a=" + file("empty", "Authorization:  \n")}},
			[]string{"empty value"}},
		{"reserved header", Options{Listen: DefaultListen, Upstreams: []string{"a=https://x/mcp"}, UpstreamAuth: []string{"a=" + file("mcp", "Mcp-Name: pay")}},
			[]string{"Mcp-Name is part of the MCP transport"}},
	} {
		ups, err := c.o.parse()
		if len(c.want) == 0 {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			continue
		}
		if err == nil {
			t.Errorf("%s: accepted %+v", c.name, ups)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: error %q does not say %q", c.name, err, w)
			}
		}
		if strings.Contains(err.Error(), "s3cret") || strings.Contains(err.Error(), ":pw@") {
			t.Errorf("%s: the error repeats a secret: %v", c.name, err)
		}
	}
	ups, err := (&Options{Listen: DefaultListen, Upstreams: []string{"pay=http://127.0.0.1:9/mcp"}, UpstreamAuth: []string{"pay=" + crlf}}).parse()
	must(t, err)
	if h := ups[0].auth.current(); h.name != "X-Api-Key" || h.value != "k1" {
		t.Fatalf("parsed credential %q: %q", h.name, h.value)
	}
}
