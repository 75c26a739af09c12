// Package docs holds no code: its test checks the links of README.md and
// of the documents in this directory, so a renamed file or heading cannot
// leave a dead link behind.
package docs

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// TestLinks checks every relative link in README.md and docs/*.md: the file
// it names exists and, when it names an #anchor, that file has a heading
// with that anchor. It also checks that README.md reaches every document
// here, directly or through another, since the README is the way in.
func TestLinks(t *testing.T) {
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append([]string{filepath.Join("..", "README.md")}, files...)
	for _, p := range checkLinks(files) {
		t.Error(p)
	}
	reached := reachable(filepath.Join("..", "README.md"))
	for _, f := range files {
		if !reached[abs(t, f)] {
			t.Errorf("%s: no link from README.md leads here", f)
		}
	}
}

// TestLinkCheckerFindsBrokenLinks makes sure the check above can fail: a
// checker that found nothing would pass TestLinks too.
func TestLinkCheckerFindsBrokenLinks(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	a := write("a.md", "# A\n\n## Two words, `code` too\n\n## Two words, `code` too\n\n"+
		"[ok](b.md) [ok](b.md#b-heading) [ok](#two-words-code-too) [ok](#two-words-code-too-1)\n"+
		"[ok](https://example.com/x.md) ![ok](b.md)\n"+
		"[missing file](c.md) [missing anchor](b.md#nope) [missing here](#nope)\n"+
		"`[in code](d.md)`\n\n```sh\n[in a fence](e.md)\n```\n")
	write("b.md", "# B heading\n")
	got := checkLinks([]string{a})
	want := []string{
		a + ":9: c.md: no such file",
		a + ":9: b.md#nope: no heading with anchor \"nope\" in " + filepath.Join(dir, "b.md"),
		a + ":9: #nope: no heading with anchor \"nope\" in " + a,
	}
	if !slices.Equal(got, want) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// link is one relative link of a document.
type link struct {
	line   int
	target string // as written: path, path#anchor or #anchor
}

// doc is what the check needs of a markdown file.
type doc struct {
	links   []link
	anchors map[string]bool
}

var (
	// linkRE matches [text](target) and ![alt](target), with an optional title.
	linkRE = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// codeSpanRE matches inline code, whose brackets are not links.
	codeSpanRE = regexp.MustCompile("`+[^`]*`+")
	// schemeRE marks absolute links (https:, mailto:), which are not checked.
	schemeRE = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
	// headingRE matches an ATX heading.
	headingRE = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
)

// parse reads a markdown file's relative links and the anchors of its
// headings, skipping fenced code blocks and inline code.
func parse(path string) (doc, error) {
	d := doc{anchors: map[string]bool{}}
	f, err := os.Open(path)
	if err != nil {
		return d, err
	}
	defer f.Close()
	seen := map[string]int{}
	fence := ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			continue
		}
		if m := headingRE.FindStringSubmatch(line); m != nil {
			// GitHub numbers repeated anchors: x, x-1, x-2.
			s := slug(m[1])
			if k := seen[s]; k > 0 {
				d.anchors[fmt.Sprintf("%s-%d", s, k)] = true
			} else {
				d.anchors[s] = true
			}
			seen[s]++
		}
		for _, m := range linkRE.FindAllStringSubmatch(codeSpanRE.ReplaceAllString(line, ""), -1) {
			if !schemeRE.MatchString(m[1]) {
				d.links = append(d.links, link{n, m[1]})
			}
		}
	}
	return d, sc.Err()
}

// slug is the anchor GitHub gives a heading: its text, lower case, without
// punctuation other than hyphens and underscores, spaces turned to hyphens.
func slug(heading string) string {
	heading = linkRE.ReplaceAllStringFunc(heading, func(l string) string {
		return l[strings.Index(l, "[")+1 : strings.Index(l, "]")]
	})
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.IsMark(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// checkLinks returns one line per broken link in files.
func checkLinks(files []string) []string {
	var problems []string
	docs := map[string]doc{}
	load := func(p string) (doc, error) {
		if d, ok := docs[p]; ok {
			return d, nil
		}
		d, err := parse(p)
		docs[p] = d
		return d, err
	}
	for _, f := range files {
		d, err := load(f)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		for _, l := range d.links {
			file, anchor, _ := strings.Cut(l.target, "#")
			target := f
			if file != "" {
				target = filepath.Join(filepath.Dir(f), filepath.FromSlash(file))
				if _, err := os.Stat(target); err != nil {
					problems = append(problems, fmt.Sprintf("%s:%d: %s: no such file", f, l.line, l.target))
					continue
				}
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: an anchor into a file that is not markdown", f, l.line, l.target))
				continue
			}
			td, err := load(target)
			if err != nil {
				problems = append(problems, err.Error())
				continue
			}
			if !td.anchors[anchor] {
				problems = append(problems, fmt.Sprintf("%s:%d: %s: no heading with anchor %q in %s", f, l.line, l.target, anchor, target))
			}
		}
	}
	return problems
}

// abs is path made absolute, the key reachable uses.
func abs(t *testing.T, path string) string {
	t.Helper()
	a, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// reachable is the set of markdown files (absolute paths) that links lead
// to from start, start included.
func reachable(start string) map[string]bool {
	seen := map[string]bool{}
	queue := []string{start}
	for len(queue) > 0 {
		f := queue[0]
		queue = queue[1:]
		key, err := filepath.Abs(f)
		if err != nil || seen[key] {
			continue
		}
		seen[key] = true
		d, err := parse(f)
		if err != nil {
			continue // TestLinks reports it
		}
		for _, l := range d.links {
			file, _, _ := strings.Cut(l.target, "#")
			if strings.HasSuffix(file, ".md") {
				queue = append(queue, filepath.Join(filepath.Dir(f), filepath.FromSlash(file)))
			}
		}
	}
	return seen
}
