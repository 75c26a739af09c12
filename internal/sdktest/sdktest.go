// Package sdktest finds, for tests, the virtualenv that holds the pinned
// flyte SDK (`make venv`).
package sdktest

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// Venv returns the virtualenv: $FM_TEST_VENV (set by `make test`), else .venv
// at the repository root. Without one (or without its python and a0) the
// test fails in CI and is skipped elsewhere, naming the fix.
func Venv(t testing.TB) string {
	t.Helper()
	venv := os.Getenv("FM_TEST_VENV")
	if venv == "" {
		venv = filepath.Join(repoRoot(), ".venv")
	}
	for _, exe := range []string{"python", "a0"} {
		if _, err := os.Stat(filepath.Join(venv, "bin", exe)); err != nil {
			msg := "the flyte SDK virtualenv is missing (" + filepath.Join(venv, "bin", exe) + "): run `make venv` or set FM_TEST_VENV"
			if os.Getenv("CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
	}
	return venv
}

// Python is the virtualenv's interpreter.
func Python(t testing.TB) string {
	t.Helper()
	return filepath.Join(Venv(t), "bin", "python")
}

// repoRoot is the directory of the fmgr.dev module above the working
// directory (tests run in their package's directory).
func repoRoot() string {
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
