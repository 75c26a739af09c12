package e2e

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// quickStartCommands returns the commands of the "Quick start" section of
// the README at path, split into words, in order: every line of its sh code
// blocks without comments, except the two the harness does itself: `make
// run` (the tests start their own manager) and activating the virtualenv
// (every SDK process runs with its bin first on PATH). Lines with the
// <run name> placeholder are kept as written.
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
			switch strings.Join(words, " ") {
			case "", "make run", "source .venv/bin/activate":
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
		if len(args) < 3 || args[0] != "flyte" || args[1] != "run" || slices.Contains(args, "<run") {
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

// runNamePlaceholder is how the README writes "the name `flyte run`
// printed" (split into words by quickStartCommands).
var runNamePlaceholder = []string{"<run", "name>"}

// quickStartExample is what a run of one example must show through the
// README's `flyte get` commands.
type quickStartExample struct {
	task      string   // the root's task name
	children  int      // child actions of the root
	childTask string   // their task name
	printed   string   // a line the task prints (flyte get logs)
	io        []string // texts `flyte get io` shows: inputs and outputs
}

var quickStartExamples = map[string]quickStartExample{
	"examples/hello.py": {
		task:    "hello.hello",
		printed: "Hello, World!",
		io:      []string{"{'name': 'World'}", `o0="Hello, World!"`},
	},
	"examples/fanout.py": {
		task: "fanout.fanout", children: 10, childTask: "fanout.square",
		printed: "the squares of 0..9 add up to 285",
		io:      []string{"{'n': 10}", "o0=285"},
	},
}

// quickStartRun is a run one of the quick start's commands started.
type quickStartRun struct {
	example string // examples/hello.py
	name    string
}

var pythonRunLine = regexp.MustCompile(`(?m)^run (\S+): `)

// Scenario 6, continued: the quick start in README.md, command by command
// as written, in a copy of the examples folder. `<run name>` becomes the
// name of each run the commands before it started; every command's output
// is checked, and a command the test has no check for fails it.
func testQuickStart(t *testing.T, m *manager) {
	ctx := scenarioContext(t, 12*time.Minute)
	dir := t.TempDir()
	copyTree(t, filepath.Join("..", "examples"), filepath.Join(dir, "examples"))
	var runs []quickStartRun

	for _, args := range quickStartCommands(t, filepath.Join("..", "README.md")) {
		for i, a := range args {
			args[i] = strings.ReplaceAll(a, "localhost:8090", sdkEndpoint(m))
		}
		line := strings.Join(args, " ")
		if i := slices.Index(args, runNamePlaceholder[0]); i >= 0 {
			if i+1 >= len(args) || args[i+1] != runNamePlaceholder[1] {
				t.Fatalf("README: %q: a placeholder other than <run name>", line)
			}
			if len(runs) == 0 {
				t.Fatalf("README: %q comes before any command that starts a run", line)
			}
			for _, r := range runs {
				withName := slices.Concat(args[:i], []string{r.name}, args[i+2:])
				checkQuickStartGet(t, ctx, m, dir, withName, r)
			}
			continue
		}
		switch {
		case len(args) > 3 && args[0] == "flyte" && args[1] == "create" && args[2] == "config":
			mustFlyte(t, ctx, dir, args[1:]...)
			checkCLIConfig(t, m, dir)
		case len(args) > 2 && args[0] == "flyte" && args[1] == "run":
			example := args[2]
			if _, ok := quickStartExamples[example]; !ok {
				t.Fatalf("README: %q runs %s, which the test has no expectations for", line, example)
			}
			r := quickStartRun{example, cliRun(t, ctx, dir, args[2:]...)}
			if phase := waitRun(t, ctx, m, r.name); phase != "SUCCEEDED" {
				t.Fatalf("%s: run %s is %s:\n%s", line, r.name, phase, mustFlyte(t, ctx, dir, "get", "run", r.name))
			}
			runs = append(runs, r)
		case len(args) == 2 && args[0] == "python":
			example := args[1]
			want, ok := quickStartExamples[example]
			if !ok {
				t.Fatalf("README: %q runs %s, which the test has no expectations for", line, example)
			}
			out, err := venvCommand(t, ctx, dir, "python", args[1:]...).CombinedOutput()
			// It waits for the run and prints its output last.
			match := pythonRunLine.FindStringSubmatch(string(out))
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			complete := match != nil && strings.TrimSpace(lines[len(lines)-1]) == want.printed
			if err != nil && complete && abortedAtExit(err) {
				t.Logf("%s: aborted at exit after printing its result (the SDK's HTTP client, see flyteCLI)", line)
				err = nil
			}
			if err != nil {
				t.Fatalf("%s: %v\n%s", line, err, tailLines(string(out), 60))
			}
			if !complete {
				t.Fatalf("%s: want `run <name>: <url>` and, last, the result %q:\n%s", line, want.printed, out)
			}
			r := quickStartRun{example, match[1]}
			if phase := waitRun(t, ctx, m, r.name); phase != "SUCCEEDED" {
				t.Fatalf("%s: run %s is %s", line, r.name, phase)
			}
			runs = append(runs, r)
		case line == "flyte get run":
			listed := cliTable(t, mustFlyte(t, ctx, dir, args[1:]...))
			for _, r := range runs {
				if !slices.ContainsFunc(listed, func(row map[string]string) bool {
					return row["Name"] == r.name && row["Phase"] == "ACTION_PHASE_SUCCEEDED"
				}) {
					t.Errorf("%s: does not list run %s (%s) as succeeded: %v", line, r.name, r.example, listed)
				}
			}
		default:
			t.Errorf("README: the test does not know what %q must show: add a check for it", line)
		}
	}
	for example := range quickStartExamples {
		if !slices.ContainsFunc(runs, func(r quickStartRun) bool { return r.example == example }) {
			t.Errorf("the quick start never runs %s", example)
		}
	}
}

// checkQuickStartGet runs one `flyte get ... <run name>` command of the
// quick start for run r (args has the name in place) and checks what it
// shows against the example's expectations.
func checkQuickStartGet(t *testing.T, ctx context.Context, m *manager, dir string, args []string, r quickStartRun) {
	t.Helper()
	want := quickStartExamples[r.example]
	line := strings.Join(args, " ")
	if len(args) < 3 || args[0] != "flyte" || args[1] != "get" {
		t.Errorf("README: the test does not know what %q must show: add a check for it", line)
		return
	}
	switch args[2] {
	case "action":
		rows := cliTable(t, mustFlyte(t, ctx, dir, args[1:]...))
		roots, children := 0, 0
		for _, row := range rows {
			switch {
			case row["Phase"] != "ACTION_PHASE_SUCCEEDED" || row["Name"] != r.name:
				t.Errorf("%s (%s): action %v, want run %s, succeeded", line, r.example, row, r.name)
			case row["Action name"] == "a0" && row["Parent"] == "" && row["Task name"] == want.task:
				roots++
			case row["Parent"] == "a0" && row["Task name"] == want.childTask:
				children++
			default:
				t.Errorf("%s (%s): unexpected action %v", line, r.example, row)
			}
		}
		if roots != 1 || children != want.children {
			t.Errorf("%s (%s): %d root(s) and %d children, want the root a0 (%s) and %d children:\n%v",
				line, r.example, roots, children, want.task, want.children, rows)
		}
	case "logs":
		checkLogs(t, ctx, m, dir, r.name, want.printed)
	case "io":
		out := mustFlyte(t, ctx, dir, args[1:]...)
		for _, text := range want.io {
			if !strings.Contains(out, text) {
				t.Errorf("%s (%s) does not show %s:\n%s", line, r.example, text, out)
			}
		}
	default:
		t.Errorf("README: the test does not know what %q must show: add a check for it", line)
	}
}

// cliTable reads the table the flyte CLI draws (`flyte get run`, `flyte get
// action`): one map per row, from column title to the cell's text. Output
// without a table yields no rows.
func cliTable(t *testing.T, out string) []map[string]string {
	t.Helper()
	var header []string
	var rows []map[string]string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if !strings.HasPrefix(line, "│") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "│"), "│")
		for i := range cells {
			cells[i] = strings.TrimSpace(cells[i])
		}
		if header == nil {
			header = cells
			continue
		}
		if len(cells) != len(header) {
			t.Fatalf("table row %q has %d cells, the header %d:\n%s", line, len(cells), len(header), out)
		}
		row := map[string]string{}
		for i, h := range header {
			row[h] = cells[i]
		}
		rows = append(rows, row)
	}
	return rows
}
