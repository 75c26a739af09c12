// Package sdktest finds, for tests, the virtualenv that holds the pinned
// flyte SDK (`make venv`).
//
// The rule: the virtualenv is *configured* when FM_TEST_VENV is set (as
// `make test` and .ci/run do), when CI is set, or when a .venv directory
// exists at the repository root (someone ran `make venv` here). A configured
// virtualenv must be complete — bin/python, bin/a0 and bin/flyte present and
// `import flyte` working — or every SDK test fails, naming what is missing:
// a broken setup never passes green. Only when nothing is configured (a
// plain `go test ./...` on a checkout that never made the virtualenv) are
// the SDK tests skipped, with the command that enables them.
package sdktest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// EnvVenv names the virtualenv explicitly.
const EnvVenv = "FM_TEST_VENV"

// executables are what the tests run from the virtualenv's bin: the
// interpreter, the task runtime the executor starts, and the CLI.
var executables = []string{"python", "a0", "flyte"}

// Venv returns the virtualenv: $FM_TEST_VENV, else .venv at the repository
// root. When it is configured (see the package comment) and incomplete the
// test fails; when nothing is configured the test is skipped.
func Venv(t testing.TB) string {
	t.Helper()
	venv, configured := locate(os.Getenv, RepoRoot())
	problem := check(venv)
	switch {
	case problem == "":
		return venv
	case configured:
		t.Fatalf("the flyte SDK virtualenv %s is configured but unusable: %s; run `make venv` (or point %s at a complete one)", venv, problem, EnvVenv)
	default:
		t.Skipf("no flyte SDK virtualenv is configured (%s unset, no %s): run `make venv` or set %s to run this test", EnvVenv, venv, EnvVenv)
	}
	return ""
}

// Python is the virtualenv's interpreter.
func Python(t testing.TB) string {
	t.Helper()
	return filepath.Join(Venv(t), "bin", "python")
}

// locate applies the rule of the package comment: which virtualenv, and
// whether its absence is a failure.
func locate(getenv func(string) string, root string) (venv string, configured bool) {
	if v := getenv(EnvVenv); v != "" {
		return v, true
	}
	venv = filepath.Join(root, ".venv")
	if _, err := os.Stat(venv); err == nil {
		return venv, true
	}
	return venv, getenv("CI") != ""
}

var (
	checkMu sync.Mutex
	checked = map[string]string{} // venv → problem ("" when usable)
)

// check returns what is wrong with the virtualenv, "" when nothing is. The
// import check runs once per virtualenv and test binary.
func check(venv string) string {
	checkMu.Lock()
	defer checkMu.Unlock()
	if problem, ok := checked[venv]; ok {
		return problem
	}
	problem := inspect(venv)
	checked[venv] = problem
	return problem
}

func inspect(venv string) string {
	for _, exe := range executables {
		if _, err := os.Stat(filepath.Join(venv, "bin", exe)); err != nil {
			return fmt.Sprintf("%s is missing", filepath.Join(venv, "bin", exe))
		}
	}
	// Generous: the first import on a loaded machine compiles bytecode.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(venv, "bin", "python"), "-c", "import flyte").CombinedOutput()
	if err != nil {
		return fmt.Sprintf("`import flyte` fails (%v): %s", err, bytes.TrimSpace(out))
	}
	return ""
}

// RepoRoot is the directory of the fmgr.dev module above the working
// directory (tests run in their package's directory).
func RepoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	for ; dir != "/"; dir = filepath.Dir(dir) {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && bytes.HasPrefix(b, []byte("module fmgr.dev\n")) {
			return dir
		}
	}
	return "."
}
