package e2e

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// quickStartCommands returns the commands of the "Quick start" section of
// the README at path, split into words, in order: every line of its sh code
// blocks except comments, `make run` (the tests start their own manager),
// `source` lines and lines with <placeholders>.
func quickStartCommands(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var cmds [][]string
	inSection, inBlock := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "## "):
			inSection = strings.EqualFold(strings.TrimSpace(line[3:]), "quick start")
		case strings.HasPrefix(line, "```"):
			inBlock = inSection && !inBlock && strings.TrimPrefix(line, "```") == "sh"
		case inBlock:
			if i := strings.Index(line, "#"); i >= 0 {
				line = line[:i]
			}
			words := strings.Fields(line)
			if len(words) == 0 || words[0] == "make" || words[0] == "source" || strings.Contains(line, "<") {
				continue
			}
			cmds = append(cmds, words)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(cmds) == 0 {
		t.Fatalf("%s has no quick start commands", path)
	}
	return cmds
}

// localRunDir matches the metadata directory of a local run, which the SDK
// always puts in /tmp/flyte/metadata/<id> (and raw data in
// /tmp/flyte/raw_data/<id>), whatever TMPDIR says.
var localRunDir = regexp.MustCompile(`/tmp/flyte/metadata/([0-9a-f-]{36})`)

// TestExamplesRunLocally runs the examples the way the quick start in
// the README's quick start does, but with --local, so they run in the SDK's own
// process and need no manager: the examples are valid Flyte 2 programs and the
// README's commands are valid CLI syntax for the pinned SDK.
func TestExamplesRunLocally(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	copyTree(t, filepath.Join("..", "examples"), filepath.Join(dir, "examples"))

	want := map[string]string{
		"examples/hello.py":  "Hello, World!",
		"examples/fanout.py": "the squares of 0..9 add up to 285",
	}
	ran := 0
	for _, args := range quickStartCommands(t, filepath.Join("..", "README.md")) {
		if len(args) < 3 || args[0] != "flyte" || args[1] != "run" {
			continue
		}
		local := append([]string{"run", "--local"}, args[2:]...)
		out := mustFlyte(t, ctx, dir, local...)
		for _, m := range localRunDir.FindAllStringSubmatch(out, -1) {
			t.Cleanup(func() {
				os.RemoveAll(m[0])
				os.RemoveAll(filepath.Join("/tmp/flyte/raw_data", m[1]))
			})
		}
		if !strings.Contains(out, "Completed Local Run") || !strings.Contains(out, want[args[2]]) {
			t.Errorf("flyte %s: want a completed run that printed %q:\n%s", strings.Join(local, " "), want[args[2]], out)
		}
		ran++
	}
	if ran != 2 {
		t.Errorf("the quick start has %d `flyte run` commands, want 2 (hello and fanout)", ran)
	}
}
