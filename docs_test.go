package lease_test

// Checks of README.md and the pages under docs/: the README's Go code is
// the code of Example functions that run, its commands are the ones CI
// runs, and no relative link between the pages points at a file or a
// heading that is not there. They read files only: no network, no store.

import (
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// readmeExampleFiles hold the Example functions the README's Go blocks
// are taken from (example_test.go is left out: its Examples are for go doc,
// and change with the API without the README having to).
var readmeExampleFiles = []string{"readme_example_test.go"}

// mdBlock is a fenced code block of a Markdown file.
type mdBlock struct {
	lang string // the info string's first word: "go", "sh", ...
	line int    // line of the opening fence, from 1
	text string // the lines between the fences, each ending in "\n"
}

// fencedBlocks returns the fenced code blocks of a Markdown text.
func fencedBlocks(md string) []mdBlock {
	var out []mdBlock
	var cur *mdBlock
	var fence string
	for i, ln := range strings.Split(md, "\n") {
		trimmed := strings.TrimLeft(ln, " ")
		if cur == nil {
			if f := fenceOf(trimmed); f != "" {
				fence = f
				info := strings.Fields(strings.TrimPrefix(trimmed, f))
				cur = &mdBlock{line: i + 1}
				if len(info) > 0 {
					cur.lang = info[0]
				}
			}
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.TrimSpace(strings.TrimLeft(trimmed, fence[:1])) == "" {
			out = append(out, *cur)
			cur = nil
			continue
		}
		cur.text += ln + "\n"
	}
	return out
}

// fenceOf returns the fence (``` or ~~~, or longer) a line opens with, or "".
func fenceOf(line string) string {
	for _, c := range []string{"`", "~"} {
		n := len(line) - len(strings.TrimLeft(line, c))
		if n >= 3 {
			return line[:n]
		}
	}
	return ""
}

// exampleBodies returns, by Example function name, the body of each
// Example in the files, its lines dedented by one tab, and whether go test
// runs it (an Example runs only with an output comment).
func exampleBodies(t *testing.T, files []string) (bodies map[string]string, runs map[string]bool) {
	t.Helper()
	bodies, runs = map[string]string{}, map[string]bool{}
	fset := token.NewFileSet()
	for _, name := range files {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		for _, ex := range doc.Examples(f) {
			fn := "Example" + ex.Name
			if ex.Suffix != "" {
				fn += "_" + ex.Suffix
			}
			start := fset.Position(ex.Code.Pos()).Offset + 1 // after "{"
			end := fset.Position(ex.Code.End()).Offset - 1   // before "}"
			var lines []string
			for _, ln := range strings.Split(strings.Trim(string(src[start:end]), "\n"), "\n") {
				lines = append(lines, strings.TrimPrefix(ln, "\t"))
			}
			bodies[fn] = strings.Join(lines, "\n") + "\n"
			runs[fn] = ex.Output != "" || ex.EmptyOutput
		}
	}
	return bodies, runs
}

// containsLines reports whether block is a run of whole lines of body.
func containsLines(body, block string) bool {
	return strings.HasPrefix(body, block) || strings.Contains(body, "\n"+block)
}

// TestReadmeGoBlocksAreExamples tests that each ```go block of README.md
// is a run of whole lines of one Example function that go test runs, so
// that the README's code compiles, runs and gives its output; and that
// the README shows lease.Run and lease.Open.
func TestReadmeGoBlocksAreExamples(t *testing.T) {
	md, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	bodies, runs := exampleBodies(t, readmeExampleFiles)
	names := make([]string, 0, len(bodies))
	for n := range bodies {
		names = append(names, n)
	}
	slices.Sort(names)
	var all string
	for _, b := range fencedBlocks(string(md)) {
		if b.lang != "go" {
			continue
		}
		all += b.text
		found := ""
		for _, n := range names {
			if containsLines(bodies[n], b.text) {
				found = n
				break
			}
		}
		switch {
		case found == "":
			t.Errorf("README.md:%d: this go block is not the code of any Example function in %s; "+
				"change the README and the Example together:\n%s", b.line, strings.Join(readmeExampleFiles, ", "), b.text)
		case !runs[found]:
			t.Errorf("README.md:%d: the go block is in %s, which has no output comment, so go test compiles it but never runs it", b.line, found)
		}
	}
	for _, call := range []string{"lease.Run(", "lease.Open("} {
		if !strings.Contains(all, call) {
			t.Errorf("README.md: no go block calls %s", call)
		}
	}
}

// TestReadmeCommandsAreCIs tests that the commands of the README's first
// ```sh block are real: each go test command is run, verbatim, by .ci/run,
// and each go run names a main package of this module.
func TestReadmeCommandsAreCIs(t *testing.T) {
	md, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	ci, err := os.ReadFile(filepath.Join(".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	var sh *mdBlock
	for _, b := range fencedBlocks(string(md)) {
		if b.lang == "sh" {
			sh = &b
			break
		}
	}
	if sh == nil {
		t.Fatal("README.md has no ```sh block with its commands")
	}
	var tests, runs int
	for _, ln := range strings.Split(sh.text, "\n") {
		cmd := strings.TrimSpace(ln)
		if i := strings.Index(cmd, " #"); i >= 0 {
			cmd = strings.TrimSpace(cmd[:i])
		}
		f := strings.Fields(cmd)
		switch {
		case len(f) >= 2 && f[0] == "go" && f[1] == "test":
			tests++
			if !strings.Contains(string(ci), cmd) {
				t.Errorf("README.md:%d: %q is not what .ci/run runs; keep the README's test command CI's own", sh.line, cmd)
			}
		case len(f) >= 3 && f[0] == "go" && f[1] == "run":
			runs++
			src, err := os.ReadFile(filepath.Join(f[2], "main.go"))
			if err != nil || !strings.Contains(string(src), "package main") {
				t.Errorf("README.md:%d: %q: %s is not a main package of this module (%v)", sh.line, cmd, f[2], err)
			}
		}
	}
	if tests == 0 || runs == 0 {
		t.Errorf("README.md:%d: the first sh block should hold a go run and a go test command; it has %d and %d", sh.line, runs, tests)
	}
}

// docPages returns README.md and the Markdown pages under docs/.
func docPages(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"README.md"}, pages...)
}

var (
	inlineLink  = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refLinkDef  = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	htmlAnchor  = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	codeSpan    = regexp.MustCompile("(`+)[^`]*?(`+)")
	headingLine = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	mdLinkText  = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
)

// proseLines returns the lines of a Markdown text outside fenced code
// blocks, by line number from 1.
func proseLines(md string) map[int]string {
	out := map[int]string{}
	fence := ""
	for i, ln := range strings.Split(md, "\n") {
		trimmed := strings.TrimLeft(ln, " ")
		if fence == "" {
			if f := fenceOf(trimmed); f != "" {
				fence = f
				continue
			}
			out[i+1] = ln
			continue
		}
		if strings.HasPrefix(trimmed, fence) && strings.TrimSpace(strings.TrimLeft(trimmed, fence[:1])) == "" {
			fence = ""
		}
	}
	return out
}

// anchors returns the anchors GitHub gives the headings of a Markdown
// text (and any <a name> or <a id>): the heading's text as rendered,
// lower-cased, with every character but letters, digits, spaces, "-" and
// "_" removed and each space made a "-"; a repeated anchor gets "-1",
// "-2", ... in order.
func anchors(md string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	lines := proseLines(md)
	nums := make([]int, 0, len(lines))
	for n := range lines {
		nums = append(nums, n)
	}
	slices.Sort(nums)
	for _, n := range nums {
		ln := lines[n]
		for _, m := range htmlAnchor.FindAllStringSubmatch(ln, -1) {
			out[m[1]] = true
		}
		m := headingLine.FindStringSubmatch(ln)
		if m == nil {
			continue
		}
		slug := slugOf(m[2])
		if k := seen[slug]; k > 0 {
			out[slug+"-"+strconv.Itoa(k)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

// slugOf is GitHub's anchor for a heading's Markdown text.
func slugOf(heading string) string {
	text := mdLinkText.ReplaceAllString(heading, "$1")
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestDocsLinks tests that every relative link in README.md and the pages
// under docs/ (outside code) names a file or directory of the repository,
// and that a #fragment names a heading of the page it points to.
func TestDocsLinks(t *testing.T) {
	pages := docPages(t)
	if len(pages) < 2 {
		t.Fatalf("no pages under docs/ beside README.md: %v", pages)
	}
	anchorsOf := map[string]map[string]bool{}
	anchorsFor := func(path string) map[string]bool {
		if a, ok := anchorsOf[path]; ok {
			return a
		}
		src, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		anchorsOf[path] = anchors(string(src))
		return anchorsOf[path]
	}
	checked := 0
	for _, page := range pages {
		src, err := os.ReadFile(page)
		if err != nil {
			t.Fatal(err)
		}
		lines := proseLines(string(src))
		nums := make([]int, 0, len(lines))
		for n := range lines {
			nums = append(nums, n)
		}
		slices.Sort(nums)
		for _, n := range nums {
			ln := codeSpan.ReplaceAllString(lines[n], "")
			var targets []string
			for _, m := range inlineLink.FindAllStringSubmatch(ln, -1) {
				targets = append(targets, m[1])
			}
			if m := refLinkDef.FindStringSubmatch(ln); m != nil {
				targets = append(targets, m[1])
			}
			for _, target := range targets {
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				checked++
				where := page + ":" + strconv.Itoa(n)
				path, frag, _ := strings.Cut(target, "#")
				file := page
				if path != "" {
					if filepath.IsAbs(path) || strings.HasPrefix(path, "/") {
						t.Errorf("%s: link %q is absolute; links between the pages are relative", where, target)
						continue
					}
					file = filepath.Join(filepath.Dir(page), filepath.FromSlash(path))
					if _, err := os.Stat(file); err != nil {
						t.Errorf("%s: link %q: no such file or directory %s", where, target, file)
						continue
					}
				}
				if frag == "" {
					continue
				}
				if !strings.HasSuffix(file, ".md") {
					t.Errorf("%s: link %q: a #fragment on a file that is not Markdown", where, target)
					continue
				}
				if !anchorsFor(file)[frag] {
					t.Errorf("%s: link %q: %s has no heading with the anchor #%s", where, target, file, frag)
				}
			}
		}
	}
	if checked == 0 {
		t.Error("no relative links found in README.md and docs/: is the link pattern broken?")
	}
}

// TestSlugOf tests the anchors TestDocsLinks checks links against, on
// headings whose GitHub anchors are known.
func TestSlugOf(t *testing.T) {
	for heading, want := range map[string]string{
		"Quickstart":          "quickstart",
		"The `lease` command": "the-lease-command",
		"At most N at once":   "at-most-n-at-once",
		"What a lease guarantees, and what it cannot": "what-a-lease-guarantees-and-what-it-cannot",
		"Redis (`backend/redis`)":                     "redis-backendredis",
		"Pick a backend: cost & failover":             "pick-a-backend-cost--failover",
		"[Fencing](docs/fencing.md) tokens":           "fencing-tokens",
		"lease_nocheck and `--json`":                  "lease_nocheck-and---json",
	} {
		if got := slugOf(heading); got != want {
			t.Errorf("slugOf(%q) = %q, want %q", heading, got, want)
		}
	}
	a := anchors("# A\n\n```\n# not a heading\n```\n## A\n### B!\n<a id=\"x\"></a>\n")
	for _, want := range []string{"a", "a-1", "b", "x"} {
		if !a[want] {
			t.Errorf("anchors: no %q in %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Error("anchors: a # line inside a code block was taken as a heading")
	}
}
