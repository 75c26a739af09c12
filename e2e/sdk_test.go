package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// This file holds what the SDK-driven scenarios share: a hermetic environment
// for SDK processes, the runner for the driver scripts in testdata/sdk, the
// flyte CLI, and /proc helpers for checking which task processes still exist.

// Project and domain every scenario runs in (the manager seeds flytesnacks).
const (
	testProject = "flytesnacks"
	testDomain  = "development"
)

// resultPrefix starts the one line of JSON a driver script reports
// (testdata/sdk/_drive.py).
const resultPrefix = "@@result "

// sdkEnv is the environment of every SDK process a test starts, on top of
// the test's own: a HOME of its own (so ~/.flyte, the SDK's code-bundle cache
// and its keyring neither leak in from the machine nor outlive the test), no
// config file named by the environment, no Sentry or telemetry, a console so
// wide that rich never wraps a line the test parses, and no bytecode files.
func sdkEnv(t *testing.T) []string {
	t.Helper()
	return []string{
		"HOME=" + t.TempDir(),
		"TMPDIR=" + t.TempDir(),
		"FLYTECTL_CONFIG=",
		"UCTL_CONFIG=",
		"FLYTE_DISABLE_SENTRY=true",
		"FLYTE_DISABLE_TELEMETRY=true",
		"COLUMNS=100000",
		"NO_COLOR=1",
		"PYTHONUNBUFFERED=1",
		"PYTHONDONTWRITEBYTECODE=1", // no __pycache__ in testdata or examples
	}
}

// sdkManagerEnv is the environment a manager that runs SDK tasks needs on
// top of the harness's: its local executor must run attempts with the
// project's virtualenv (the harness starts the manager in e2e/, where the
// default ./.venv/bin does not exist, and `a0` is not on the test's PATH).
// Pass it again to Restart.
func sdkManagerEnv(t *testing.T) []string {
	t.Helper()
	return []string{"FLYTE_MANAGER_EXECUTOR_LOCAL_PYTHON=" + filepath.Join(venv(t), "bin")}
}

// startSDKManager starts a manager with sdkManagerEnv and env.
func startSDKManager(t *testing.T, dsn string, env ...string) *manager {
	t.Helper()
	return startManager(t, dsn, append(sdkManagerEnv(t), env...)...)
}

// sdkEndpoint is the manager's address as a user gives it to the SDK
// (`flyte create config --endpoint localhost:<port>`, as the manager's banner
// suggests). Not 127.0.0.1:<port>: the SDK takes the first label of a host
// with more than two dot-separated parts as the org, so runs would land in
// org "127".
func sdkEndpoint(m *manager) string {
	_, port, _ := strings.Cut(m.Endpoint(), ":")
	return "localhost:" + port
}

// venvCommand prepares one of the virtualenv's executables (python, flyte)
// with sdkEnv, running in dir. A dir outside this repository keeps the SDK from
// finding a .flyte/config.yaml at the git root.
func venvCommand(t *testing.T, ctx context.Context, dir, exe string, args ...string) *exec.Cmd {
	t.Helper()
	bin := filepath.Join(venv(t), "bin")
	cmd := exec.CommandContext(ctx, filepath.Join(bin, exe), args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH")), sdkEnv(t)...)
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// driver runs testdata/sdk/<script> against the manager and decodes its
// result line into out. A driver that fails ends the test with the reason it
// gave (its last stderr line) first and its full output after.
func driver(t *testing.T, ctx context.Context, out any, script string, args ...string) {
	t.Helper()
	driverWith(t, ctx, nil, out, script, args...)
}

// driverWith is driver with env last in the script's environment: e.g. a
// HOME of the test's, so that the SDK's client cache outlives one script.
func driverWith(t *testing.T, ctx context.Context, env []string, out any, script string, args ...string) {
	t.Helper()
	driverIn(t, ctx, "", env, out, script, args...)
}

// driverIn is driverWith running in dir, a copy of testdata/sdk (so dir is
// the code bundle's root, as a user's working directory is); "" runs
// testdata/sdk's script from a directory of its own.
func driverIn(t *testing.T, ctx context.Context, dir string, env []string, out any, script string, args ...string) {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("testdata", "sdk", script))
	if err != nil {
		t.Fatal(err)
	}
	if dir == "" {
		dir = t.TempDir()
	} else {
		path = filepath.Join(dir, script)
	}
	cmd := venvCommand(t, ctx, dir, "python", append([]string{path}, args...)...)
	cmd.Env = append(cmd.Env, env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	line := resultLine(stdout.String())
	if runErr != nil && line != "" && abortedAtExit(runErr) {
		// The driver finished and reported; only the SDK's HTTP client died
		// at interpreter exit (see flyteCLI).
		t.Logf("%s aborted at exit after reporting its result", script)
		runErr = nil
	}
	if runErr != nil || line == "" {
		reason := lastLineWith(stderr.String(), "DRIVER FAILED: ")
		if reason == "" {
			reason = fmt.Sprintf("exited with %v and no result line", runErr)
		}
		if ctx.Err() != nil {
			reason = "killed at the test's deadline: " + ctx.Err().Error()
		}
		t.Fatalf("%s %s:\n%s\n--- stdout:\n%s\n--- stderr:\n%s", script, strings.Join(args, " "), reason, stdout.String(), tailLines(stderr.String(), 80))
	}
	if err := json.Unmarshal([]byte(line), out); err != nil {
		t.Fatalf("%s: result line %q: %v", script, line, err)
	}
	if len(line) > 3000 {
		line = line[:3000] + " ..."
	}
	t.Logf("%s: %s", script, line)
}

func resultLine(stdout string) string {
	var last string
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), resultPrefix); ok {
			last = rest
		}
	}
	return last
}

func lastLineWith(s, marker string) string {
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if strings.Contains(lines[i], marker) {
			return strings.TrimSpace(lines[i])
		}
	}
	return ""
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d lines before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

var ansiEscape = regexp.MustCompile(`\x1b\[[0-9;?]*[ -/]*[@-~]`)

// flyteCLI runs the flyte CLI from the virtualenv in dir and returns its
// combined output without terminal escapes. The CLI draws with rich on a forced
// terminal; sdkEnv's COLUMNS keeps lines unwrapped.
//
// Read-only commands (`flyte get ...`) are run again when the CLI dies of
// SIGABRT: the SDK's Rust HTTP client (pyqwest) now and then aborts during
// interpreter teardown, after the command printed everything, under load.
// Commands that change something are never repeated.
func flyteCLI(t *testing.T, ctx context.Context, dir string, args ...string) (string, error) {
	t.Helper()
	// A secret's create or delete that the abort at exit hid either
	// happened or not: running it again tells which (the second says the
	// secret already exists, or is not found, when the first did its work).
	done := secretWriteDone(args)
	var text string
	var err error
	for try := 1; ; try++ {
		cmd := venvCommand(t, ctx, dir, "flyte", args...)
		var out []byte
		out, err = cmd.CombinedOutput()
		text = ansiEscape.ReplaceAllString(string(out), "")
		if err != nil && try > 1 && done != "" && strings.Contains(strings.ToLower(text), done) {
			return text, nil // the aborted try before this one did it
		}
		if err == nil || try == 3 || !abortedAtExit(err) {
			break
		}
		if args[0] != "get" && (done == "" || strings.Contains(strings.ToLower(text), done)) {
			break // a write whose outcome another try cannot tell, or an answer already printed
		}
		t.Logf("flyte %s aborted at exit (try %d); running it again", strings.Join(args, " "), try)
	}
	if err != nil {
		return text, fmt.Errorf("flyte %s: %w\n%s", strings.Join(args, " "), err, tailLines(text, 60))
	}
	return text, nil
}

// secretWriteDone is, for `flyte create|delete secret`, what running the
// command again prints when the first run did its work ("" otherwise).
func secretWriteDone(args []string) string {
	if len(args) < 2 || args[1] != "secret" {
		return ""
	}
	switch args[0] {
	case "create":
		return "already exists"
	case "delete":
		return "not found"
	}
	return ""
}

func abortedBySignal(exit *exec.ExitError) bool {
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGABRT
}

// abortedAtExit says whether err (from a command of the virtualenv) is that
// SIGABRT. Callers accept it only once the command's output is complete.
func abortedAtExit(err error) bool {
	var exit *exec.ExitError
	return errors.As(err, &exit) && abortedBySignal(exit)
}

// mustFlyte is flyteCLI that ends the test when the command fails.
func mustFlyte(t *testing.T, ctx context.Context, dir string, args ...string) string {
	t.Helper()
	out, err := flyteCLI(t, ctx, dir, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// copyTree copies the regular files under src into dst.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			if d.Name() == "__pycache__" {
				return filepath.SkipDir
			}
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// proc is a process seen in /proc.
type proc struct {
	PID     int
	Cmdline string
}

func (p proc) String() string { return fmt.Sprintf("pid %d: %s", p.PID, p.Cmdline) }

// liveProcess reads /proc/<pid>; ok is false when the process is gone or a
// zombie (exited, not yet reaped: it runs nothing).
func liveProcess(pid int) (p proc, environ []string, ok bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return proc{}, nil, false
	}
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 {
		if f := strings.Fields(string(stat[i+1:])); len(f) > 0 && f[0] == "Z" {
			return proc{}, nil, false
		}
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	p = proc{PID: pid, Cmdline: strings.TrimSpace(strings.ReplaceAll(string(cmdline), "\x00", " "))}
	return p, strings.Split(string(env), "\x00"), true
}

// processesWith lists the live processes (other than this test) that have
// key=value in their environment or value in their command line.
func processesWith(key, value string) []proc {
	entries, _ := os.ReadDir("/proc")
	var found []proc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		p, env, ok := liveProcess(pid)
		if !ok {
			continue
		}
		if slices.Contains(env, key+"="+value) || strings.Contains(p.Cmdline, value) {
			found = append(found, p)
		}
	}
	return found
}

// recordedPIDs reads the pids task code recorded as empty files named
// pid-<pid> in dir.
func recordedPIDs(t *testing.T, dir string) []int {
	t.Helper()
	matches, err := filepath.Glob(filepath.Join(dir, "pid-*"))
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, m := range matches {
		if pid, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(m), "pid-")); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// livePIDs returns those of pids that are still running processes with
// needle in their environment (so a recycled pid is not mistaken for a task).
func livePIDs(pids []int, needle string) []proc {
	var live []proc
	for _, pid := range pids {
		p, env, ok := liveProcess(pid)
		if ok && needle != "" && slices.Contains(env, needle) {
			live = append(live, p)
		}
	}
	return live
}

// reapRecordedOnCleanup makes sure no process that a scenario's tasks
// recorded in dir outlives the test, whatever the manager did: at cleanup it
// kills those still running whose environment contains one of needles()
// (a marker the test put into the run's environment, RUN_NAME=<run>). Only
// processes this test's tasks started are touched.
func reapRecordedOnCleanup(t *testing.T, dir string, needles func() []string) {
	t.Cleanup(func() {
		for _, needle := range needles() {
			for _, p := range livePIDs(recordedPIDs(t, dir), needle) {
				t.Logf("cleanup: killing leftover task process %s", p)
				_ = syscall.Kill(p.PID, syscall.SIGKILL)
			}
		}
	})
}
