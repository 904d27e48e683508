package docs_test

import (
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"regexp"
	"strings"
	"unicode"

	"github.com/spf13/cobra"
)

// The checker: markdown read the way GitHub renders it, as far as links,
// anchors and shell commands go. Each check returns its problems as
// "file:line: message", so a test can list them all at once.

// A page is a markdown file of the repository: its path (slash-separated,
// from the repository root) and its text.
type page struct {
	path string
	text string
}

// A block is a fenced code block: its info string's first word and its
// lines, with the line number of the first.
type block struct {
	lang  string
	line  int
	lines []string
}

var fenceOpen = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})\\s*([^\\s`]*)")

// split returns the page's text with the content of fenced code blocks
// blanked (lines kept, so offsets still give line numbers) and the blocks.
func split(text string) (prose string, blocks []block) {
	lines := strings.Split(text, "\n")
	var fence string // the open fence's characters, "" outside a block
	var cur *block
	for i, line := range lines {
		if fence == "" {
			if m := fenceOpen.FindStringSubmatch(line); m != nil {
				fence = m[1]
				blocks = append(blocks, block{lang: strings.ToLower(m[2]), line: i + 2})
				cur = &blocks[len(blocks)-1]
			}
			continue
		}
		if t := strings.TrimSpace(line); strings.HasPrefix(t, fence) && strings.Trim(t, fence[:1]) == "" {
			fence, cur = "", nil
			continue
		}
		cur.lines = append(cur.lines, line)
		lines[i] = ""
	}
	return strings.Join(lines, "\n"), blocks
}

// withoutCodeSpans blanks inline code (`...`, “...“), keeping offsets.
func withoutCodeSpans(s string) string {
	b := []byte(s)
	for i := 0; i < len(b); {
		if b[i] != '`' {
			i++
			continue
		}
		n := 1
		for i+n < len(b) && b[i+n] == '`' {
			n++
		}
		run := strings.Repeat("`", n)
		end := strings.Index(string(b[i+n:]), run)
		if end < 0 {
			i += n
			continue
		}
		for j := i; j < i+n+end+n; j++ {
			if b[j] != '\n' {
				b[j] = ' '
			}
		}
		i += n + end + n
	}
	return string(b)
}

var (
	heading    = regexp.MustCompile(`^ {0,3}#{1,6}[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$`)
	setextLine = regexp.MustCompile(`^ {0,3}(=+|-+)[ \t]*$`)
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)=["']([^"']+)["']`)
	mdLink     = regexp.MustCompile(`!?\[([^\]]*)\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refLink    = regexp.MustCompile(`(?m)^ {0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	htmlHref   = regexp.MustCompile(`<a\s[^>]*href=["']([^"']+)["']`)
	scheme     = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	inlineLink = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
	htmlTag    = regexp.MustCompile(`<[^>]+>`)
)

// anchors are the fragments GitHub gives a page: one per heading, by its
// slug, with -1, -2, ... for repeats, and the explicit <a id|name>.
func anchors(text string) map[string]bool {
	prose, _ := split(text)
	seen := map[string]int{}
	out := map[string]bool{}
	add := func(title string) {
		base := slug(title)
		s := base
		for _, taken := seen[s]; taken; _, taken = seen[s] {
			seen[base]++
			s = fmt.Sprintf("%s-%d", base, seen[base])
		}
		seen[s] = 0
		out[s] = true
	}
	lines := strings.Split(prose, "\n")
	for i, line := range lines {
		if m := heading.FindStringSubmatch(line); m != nil {
			add(m[1])
		} else if i > 0 && setextLine.MatchString(line) && setextTitle(lines[i-1]) {
			add(strings.TrimSpace(lines[i-1]))
		}
	}
	for _, m := range htmlAnchor.FindAllStringSubmatch(prose, -1) {
		out[m[1]] = true
	}
	return out
}

// setextTitle: a line that an underline of = or - turns into a heading.
func setextTitle(line string) bool {
	t := strings.TrimSpace(line)
	return t != "" && !strings.ContainsAny(t[:1], "#|->*") && !heading.MatchString(line)
}

// slug is GitHub's anchor for a heading: its text as rendered (links to
// their text, no code marks, emphasis or tags), lowercased, every
// character but letters, digits, marks, '-', '_' and spaces dropped,
// each space a '-'.
func slug(title string) string {
	text := inlineLink.ReplaceAllString(title, "$1")
	text = htmlTag.ReplaceAllString(text, "")
	text = strings.NewReplacer("`", "", "*", "").Replace(text)
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(text)) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.M, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// checkLinks: every relative link of the pages names a file or directory
// of repo, and every #fragment an anchor of the markdown page it points
// into. Links with a scheme (https:, mailto:) are not followed.
func checkLinks(repo fs.FS, pages []page) []string {
	var problems []string
	for _, p := range pages {
		prose, _ := split(p.text)
		prose = withoutCodeSpans(prose)
		var found [][]int // target offsets
		for _, re := range []*regexp.Regexp{mdLink, refLink, htmlHref} {
			for _, m := range re.FindAllStringSubmatchIndex(prose, -1) {
				found = append(found, m[len(m)-2:])
			}
		}
		for _, at := range found {
			target := prose[at[0]:at[1]]
			line := strings.Count(prose[:at[0]], "\n") + 1
			if msg := resolve(repo, p.path, target); msg != "" {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: %s", p.path, line, target, msg))
			}
		}
	}
	return problems
}

// resolve says what is wrong with one link target of the page at from, or "".
func resolve(repo fs.FS, from, target string) string {
	if scheme.MatchString(target) || strings.HasPrefix(target, "//") {
		return ""
	}
	file, fragment, _ := strings.Cut(target, "#")
	file, err := url.PathUnescape(file)
	if err != nil {
		return err.Error()
	}
	name := from
	if file != "" {
		if strings.HasPrefix(file, "/") {
			name = path.Clean(strings.TrimPrefix(file, "/"))
		} else {
			name = path.Join(path.Dir(from), file)
		}
		if !fs.ValidPath(name) {
			return "outside the repository"
		}
		info, err := fs.Stat(repo, name)
		if err != nil {
			return "no such file"
		}
		if info.IsDir() {
			if fragment != "" {
				return "an anchor into a directory"
			}
			return ""
		}
	}
	if fragment == "" || !strings.HasSuffix(name, ".md") {
		return ""
	}
	text, err := fs.ReadFile(repo, name)
	if err != nil {
		return err.Error()
	}
	if !anchors(string(text))[fragment] {
		return fmt.Sprintf("no heading or anchor %q in %s", fragment, name)
	}
	return ""
}

// shellBlocks are the languages whose blocks hold command lines; console
// and text blocks show commands after a "$ " prompt.
var shellBlocks = map[string]bool{"": true, "sh": true, "bash": true, "shell": true, "console": true, "text": true}

var heredocStart = regexp.MustCompile(`<<-?\s*(['"]?)([A-Za-z_][A-Za-z0-9_]*)['"]?`)

// commandLines returns the logical command lines of a shell block, with
// their first line's number: "$ " prompts dropped, lines continued with a
// trailing \, | , && or || joined, heredoc bodies (YAML, JSON) skipped.
func commandLines(b block) (lines []string, at []int) {
	var pending string
	start, heredoc := 0, ""
	for i, raw := range b.lines {
		if heredoc != "" {
			if strings.TrimSpace(raw) == heredoc {
				heredoc = ""
			}
			continue
		}
		if pending == "" {
			start = b.line + i
			raw = strings.TrimPrefix(strings.TrimLeft(raw, " "), "$ ")
		}
		line := pending + raw
		trimmed := strings.TrimRight(line, " \t")
		if strings.HasSuffix(trimmed, "\\") {
			pending = strings.TrimSuffix(trimmed, "\\") + " "
			continue
		}
		if strings.HasSuffix(trimmed, "|") || strings.HasSuffix(trimmed, "&&") {
			pending = trimmed + " "
			continue
		}
		pending = ""
		lines, at = append(lines, line), append(at, start)
		if m := heredocStart.FindStringSubmatch(line); m != nil {
			heredoc = m[2]
		}
	}
	return lines, at
}

// simpleCommands splits a command line at |, ||, &&, ; and & into the
// words of each command, quotes removed; redirections with their targets,
// and a comment, are left out. A quote left open is an error.
func simpleCommands(line string) ([][]string, error) {
	var cmds [][]string
	var words []string
	var word strings.Builder
	inWord, dropWord := false, false
	var quote rune
	endWord := func() {
		if inWord && !dropWord {
			words = append(words, word.String())
		}
		word.Reset()
		inWord, dropWord = false, false
	}
	endCommand := func() {
		endWord()
		if len(words) > 0 {
			cmds = append(cmds, words)
		}
		words = nil
	}
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			} else if r == '\\' && quote == '"' && i+1 < len(rs) {
				i++
				word.WriteRune(rs[i])
			} else {
				word.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '\\' && i+1 < len(rs):
			i++
			word.WriteRune(rs[i])
			inWord = true
		case r == ' ' || r == '\t':
			endWord()
		case r == '#' && !inWord:
			endCommand()
			return cmds, nil
		case r == '|' || r == '&' || r == ';':
			endCommand()
			if i+1 < len(rs) && (rs[i+1] == r || (r == '|' && rs[i+1] == '&')) {
				i++
			}
		case r == '>' || r == '<':
			// A file descriptor before it (2>) is part of the redirection.
			if inWord && strings.Trim(word.String(), "0123456789") == "" {
				word.Reset()
				inWord = false
			}
			endWord()
			for i+1 < len(rs) && (rs[i+1] == '>' || rs[i+1] == '<' || rs[i+1] == '&' || rs[i+1] == '-') {
				i++
			}
			for i+1 < len(rs) && (rs[i+1] == ' ' || rs[i+1] == '\t') {
				i++
			}
			inWord, dropWord = true, true // the target
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		return nil, fmt.Errorf("a %c quote is not closed", quote)
	}
	endCommand()
	return cmds, nil
}

var envAssignment = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

// toolgateArgs returns the arguments of a command that runs toolgate
// (toolgate, bin/toolgate, ./bin/toolgate, after any NAME=value), or false.
func toolgateArgs(words []string) ([]string, bool) {
	for len(words) > 0 && envAssignment.MatchString(words[0]) {
		words = words[1:]
	}
	if len(words) == 0 || (words[0] != "toolgate" && !strings.HasSuffix(words[0], "/toolgate")) {
		return nil, false
	}
	return words[1:], true
}

// checkCommands: every toolgate command line in the pages' shell blocks
// names a command of the tree newRoot builds and parses with its flags,
// without running it.
func checkCommands(newRoot func() *cobra.Command, pages []page) []string {
	var problems []string
	for _, p := range pages {
		_, blocks := split(p.text)
		for _, b := range blocks {
			if !shellBlocks[b.lang] {
				continue
			}
			lines, at := commandLines(b)
			for i, line := range lines {
				if !strings.Contains(line, "toolgate") {
					continue
				}
				cmds, err := simpleCommands(line)
				for _, words := range cmds {
					args, ok := toolgateArgs(words)
					if !ok {
						continue
					}
					if msg := parse(newRoot(), args); msg != "" {
						problems = append(problems, fmt.Sprintf("%s:%d: toolgate %s: %s", p.path, at[i], strings.Join(args, " "), msg))
					}
				}
				if err != nil && strings.HasPrefix(strings.TrimSpace(line), "toolgate") {
					problems = append(problems, fmt.Sprintf("%s:%d: %s: %v", p.path, at[i], line, err))
				}
			}
		}
	}
	return problems
}

// parse finds the subcommand args name and parses its flags and
// arguments as cobra would before running it; it says what is wrong, or "".
func parse(root *cobra.Command, args []string) string {
	cmd, rest, err := root.Find(args)
	if err != nil {
		return err.Error()
	}
	unknown := func(name string) string {
		return fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	}
	// Find stops at the first word that names no subcommand.
	if cmd.HasAvailableSubCommands() && len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		return unknown(rest[0])
	}
	cmd.InitDefaultHelpFlag()
	if err := cmd.ParseFlags(rest); err != nil {
		return err.Error()
	}
	positional := cmd.Flags().Args()
	if cmd.HasAvailableSubCommands() && len(positional) > 0 {
		return unknown(positional[0])
	}
	if err := cmd.ValidateArgs(positional); err != nil {
		return err.Error()
	}
	return ""
}
