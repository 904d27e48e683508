package sidecar

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
		o    MCPOptions
		want []string // substrings of the error; none: valid
	}{
		{"off", MCPOptions{}, nil},
		{"one upstream", MCPOptions{Listen: DefaultMCPListen, Upstreams: []string{"github=https://mcp.example.com/mcp"}}, nil},
		{"with credentials", MCPOptions{Listen: DefaultMCPListen, Upstreams: []string{"github=https://x/mcp", "pay=http://127.0.0.1:9/mcp"},
			UpstreamAuth: []string{"github=" + good, "pay=" + crlf}}, nil},
		{"auth without upstream", MCPOptions{Listen: DefaultMCPListen, UpstreamAuth: []string{"github=" + good}},
			[]string{"--mcp-upstream-auth needs --mcp-upstream"}},
		{"not NAME=URL", MCPOptions{Listen: DefaultMCPListen, Upstreams: []string{"https://x/mcp"}}, []string{`--mcp-upstream "https://x/mcp" is not NAME=URL`}},
		{"bad name", MCPOptions{Listen: DefaultMCPListen, Upstreams: []string{"Git Hub=https://x/mcp"}}, []string{`NAME "Git Hub" must be`}},
		{"twice", MCPOptions{Listen: DefaultMCPListen, Upstreams: []string{"a=https://x/mcp", "a=https://y/mcp"}}, []string{`NAME "a" is given twice`}},
		{"scheme", MCPOptions{Listen: DefaultMCPListen, Upstreams: []string{"a=ftp://x/mcp"}}, []string{"scheme must be http or https"}},
		{"no host", MCPOptions{Listen: DefaultMCPListen, Upstreams: []string{"a=http:///mcp"}}, []string{"has no host"}},
		{"userinfo", MCPOptions{Listen: DefaultMCPListen, Upstreams: []string{"a=https://u:pw@x/mcp"}}, []string{"carries credentials in the URL", "xxxxx"}},
		{"bad listen", MCPOptions{Listen: "nowhere", Upstreams: []string{"a=https://x/mcp"}}, []string{"--mcp-listen"}},
		{"auth for unknown", MCPOptions{Listen: DefaultMCPListen, Upstreams: []string{"a=https://x/mcp"}, UpstreamAuth: []string{"b=" + good}},
			[]string{`no --mcp-upstream is named "b"`}},
		{"auth not NAME=FILE", MCPOptions{Listen: DefaultMCPListen, Upstreams: []string{"a=https://x/mcp"}, UpstreamAuth: []string{"a"}},
			[]string{`"a" is not NAME=FILE`}},
		{"auth twice", MCPOptions{Listen: DefaultMCPListen, Upstreams: []string{"a=https://x/mcp"}, UpstreamAuth: []string{"a=" + good, "a=" + good}},
			[]string{`NAME "a" is given twice`}},
		{"missing file", MCPOptions{Listen: DefaultMCPListen, Upstreams: []string{"a=https://x/mcp"}, UpstreamAuth: []string{"a=" + filepath.Join(dir, "nope")}},
			[]string{"no such file"}},
		{"two lines", MCPOptions{Listen: DefaultMCPListen, Upstreams: []string{"a=https://x/mcp"}, UpstreamAuth: []string{"a=" + file("two", "Authorization: Bearer x\nX-Other: y\n")}},
			[]string{"more than one line"}},
		{"no colon", MCPOptions{Listen: DefaultMCPListen, Upstreams: []string{"a=https://x/mcp"}, UpstreamAuth: []string{"a=" + file("bare", "Bearer s3cret")}},
			[]string{"is not a header line"}},
		{"bad name in file", MCPOptions{Listen: DefaultMCPListen, Upstreams: []string{"a=https://x/mcp"}, UpstreamAuth: []string{"a=" + file("sp", "Auth orization: x")}},
			[]string{"is not a valid header name"}},
		{"empty value", MCPOptions{Listen: DefaultMCPListen, Upstreams: []string{"a=https://x/mcp"}, UpstreamAuth: []string{"a=" + file("empty", "Authorization:  \n")}},
			[]string{"empty value"}},
		{"reserved header", MCPOptions{Listen: DefaultMCPListen, Upstreams: []string{"a=https://x/mcp"}, UpstreamAuth: []string{"a=" + file("mcp", "Mcp-Name: pay")}},
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
	ups, err := (&MCPOptions{Listen: DefaultMCPListen, Upstreams: []string{"pay=http://127.0.0.1:9/mcp"}, UpstreamAuth: []string{"pay=" + crlf}}).parse()
	must(t, err)
	if h := ups[0].auth.current(); h.name != "X-Api-Key" || h.value != "k1" {
		t.Fatalf("parsed credential %q: %q", h.name, h.value)
	}
}

// TestMCPFlags: the flags reach Options and Validate reports their
// problems with the rest.
func TestMCPFlags(t *testing.T) {
	cmd := NewCommand()
	must(t, cmd.ParseFlags([]string{"--bundle-file", "b.json", "--mcp-upstream", "a=http://127.0.0.1:1/mcp",
		"--mcp-upstream", "b=https://x/mcp", "--mcp-listen", "127.0.0.1:0"}))
	mcpFlag := cmd.Flags().Lookup("mcp-upstream")
	if got := mcpFlag.Value.String(); got != "[a=http://127.0.0.1:1/mcp,b=https://x/mcp]" {
		t.Fatalf("--mcp-upstream %s", got)
	}
	o := DefaultOptions()
	o.BundleFile = "b.json"
	o.MCP.Upstreams = []string{"bad"}
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--mcp-upstream") {
		t.Fatalf("Validate: %v", err)
	}
	o.MCP.Upstreams = []string{"a=http://127.0.0.1:1/mcp"}
	o.MCP.Listen = "127.0.0.1:8181"
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--mcp-listen 127.0.0.1:8181 is also a --listen") {
		t.Fatalf("Validate with --mcp-listen on --listen: %v", err)
	}
}
