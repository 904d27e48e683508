// Package docs_test keeps the documentation honest: every relative link and
// #anchor in README.md, DEVELOPMENT.md, CHANGELOG.md, docs/ and the clients' READMEs
// resolves, and every toolgate command line shown in a fenced block parses
// with the current command tree. The checker is in check_test.go;
// TestCheckerFindsMistakes shows it fails on each kind of mistake.
package docs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/spf13/cobra"

	"github.com/toolgate/toolgate/approve"
	"github.com/toolgate/toolgate/cli"
	"github.com/toolgate/toolgate/freeze"
	"github.com/toolgate/toolgate/manager"
	"github.com/toolgate/toolgate/sidecar"
)

// toolgate is the command tree of the toolgate binary, as cmd/toolgate
// builds it.
func toolgate() *cobra.Command {
	return cli.NewRootCommand(manager.NewCommand(), sidecar.NewCommand(cli.BuildVersion()),
		freeze.NewFreezeCommand(), freeze.NewUnfreezeCommand(),
		approve.NewApproveCommand(), approve.NewDenyCommand(), approve.NewApprovalsCommand())
}

// pages reads the documentation, from the repository root (this test runs
// in docs/).
func pages(t *testing.T) []page {
	t.Helper()
	names := []string{"README.md", "DEVELOPMENT.md", "CHANGELOG.md", "clients/python/README.md", "clients/typescript/README.md"}
	topics, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(topics) == 0 {
		t.Fatal("no docs/*.md pages")
	}
	for _, name := range topics {
		names = append(names, "docs/"+name)
	}
	var out []page
	for _, name := range names {
		text, err := os.ReadFile(filepath.Join("..", filepath.FromSlash(name)))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page{name, string(text)})
	}
	return out
}

func TestLinksResolve(t *testing.T) {
	for _, p := range checkLinks(os.DirFS(".."), pages(t)) {
		t.Error(p)
	}
}

func TestCommandsParse(t *testing.T) {
	for _, p := range checkCommands(toolgate, pages(t)) {
		t.Error(p)
	}
}

// TestPagesSayWhatTheReaderCanDo: each docs/ page opens, under its title,
// with what the reader can do after reading it.
func TestPagesSayWhatTheReaderCanDo(t *testing.T) {
	for _, p := range pages(t) {
		if !strings.HasPrefix(p.path, "docs/") {
			continue
		}
		title, rest, _ := strings.Cut(p.text, "\n\n")
		if !strings.HasPrefix(title, "# ") || !strings.HasPrefix(rest, "After reading this page you ") {
			t.Errorf("%s: starts %q: a title, then \"After reading this page you can ...\"", p.path, firstLines(p.text, 3))
		}
	}
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}

// TestCheckerFindsMistakes: a broken link, a broken anchor, an unknown
// command and an unknown flag each fail the check, with file and line, and
// what is right passes.
func TestCheckerFindsMistakes(t *testing.T) {
	repo := fstest.MapFS{
		"README.md": {Data: []byte("# Demo\n\n" +
			"See [the guide](docs/guide.md#first-steps), [its second part](docs/guide.md#first-steps-1),\n" +
			"[a section](#demo), [a named spot](docs/guide.md#here) and [a folder](docs).\n" +
			"Missing: [gone](docs/gone.md) and [a wrong anchor](docs/guide.md#no-such-heading).\n" +
			"Not links: `[code](nowhere.md)` and [the web](https://example.com/x.md).\n" +
			"\n```sh\n" +
			"toolgate eval -f policies/ --request req.json --explain\n" +
			"echo '{}' | TOOLGATE_URL=unix:///s toolgate hook claude-code --bundle-dir dir 2>/dev/null\n" +
			"toolgate bundle -f policies/ \\\n  --no-such-flag\n" +
			"kubectl apply -f - <<'YAML'\ntoolgate: this is YAML, not a command\nYAML\n" +
			"bin/toolgate evaluate -f policies/\n" +
			"```\n")},
		"docs/guide.md": {Data: []byte("# Guide\n\n## First steps!\n\ntext\n\n## First steps?\n\n<a id=\"here\"></a>\n\n" +
			"```console\n$ toolgate freeze agent-7 --for 2h --wait=false\n$ toolgate freeze agent-7 --for two-hours\n```\n")},
	}
	docs := []page{{"README.md", string(repo["README.md"].Data)}, {"docs/guide.md", string(repo["docs/guide.md"].Data)}}

	links := checkLinks(repo, docs)
	commands := checkCommands(toolgate, docs)
	want := []struct {
		problems []string
		prefix   string
		says     string
	}{
		{links, "README.md:5: docs/gone.md", "no such file"},
		{links, "README.md:5: docs/guide.md#no-such-heading", `no heading or anchor "no-such-heading"`},
		{commands, "README.md:11: toolgate bundle -f policies/ --no-such-flag", "unknown flag: --no-such-flag"},
		{commands, "README.md:16: toolgate evaluate -f policies/", `unknown command "evaluate"`},
		{commands, "docs/guide.md:13: toolgate freeze agent-7 --for two-hours", `invalid argument "two-hours"`},
	}
	if len(links)+len(commands) != len(want) {
		t.Errorf("%d problems, want %d:\n%s", len(links)+len(commands), len(want), strings.Join(append(links, commands...), "\n"))
	}
	for _, w := range want {
		found := false
		for _, p := range w.problems {
			found = found || (strings.HasPrefix(p, w.prefix) && strings.Contains(p, w.says))
		}
		if !found {
			t.Errorf("no problem %q ... %q in:\n%s", w.prefix, w.says, strings.Join(w.problems, "\n"))
		}
	}
}

// TestSlug: GitHub's anchors for headings users write.
func TestSlug(t *testing.T) {
	for title, want := range map[string]string{
		"Tiered policies, bindings and context (the gateway model)": "tiered-policies-bindings-and-context-the-gateway-model",
		"Inside the agent's Pod":                                    "inside-the-agents-pod",
		"`toolgate eval`":                                           "toolgate-eval",
		"MCP servers the agent starts itself (stdio)":               "mcp-servers-the-agent-starts-itself-stdio",
		"Calling the sidecar & the clients":                         "calling-the-sidecar--the-clients",
		"snake_case and [a link](x.md)":                             "snake_case-and-a-link",
	} {
		if got := slug(title); got != want {
			t.Errorf("slug(%q) = %q, want %q", title, got, want)
		}
	}
}
