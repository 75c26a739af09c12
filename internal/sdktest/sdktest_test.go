package sdktest

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// outcome is how Venv ended a (recorded) test.
type outcome struct {
	fatal, skip string
	venv        string
}

// recorder is a testing.TB whose Fatal and Skip end only the goroutine
// running Venv and record the message.
type recorder struct {
	testing.TB
	out *outcome
}

func (r recorder) Helper() {}
func (r recorder) Fatalf(format string, args ...any) {
	r.out.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r recorder) Fatal(args ...any) { r.out.fatal = fmt.Sprint(args...); runtime.Goexit() }
func (r recorder) Skipf(format string, args ...any) {
	r.out.skip = fmt.Sprintf(format, args...)
	runtime.Goexit()
}
func (r recorder) Skip(args ...any) { r.out.skip = fmt.Sprint(args...); runtime.Goexit() }

func runVenv(t *testing.T) outcome {
	var out outcome
	done := make(chan struct{})
	go func() {
		defer close(done)
		out.venv = Venv(recorder{TB: t, out: &out})
	}()
	<-done
	return out
}

// A virtualenv named by FM_TEST_VENV that lacks the SDK fails the test,
// whether CI is set or not: `make test` on a laptop must not pass green.
func TestConfiguredButBrokenVenvFails(t *testing.T) {
	t.Setenv("CI", "")
	for name, files := range map[string][]string{
		"empty":            nil,
		"no a0":            {"python", "flyte"},
		"no flyte package": {"python", "a0", "flyte"}, // python here is not an interpreter
	} {
		t.Run(name, func(t *testing.T) {
			venv := t.TempDir()
			if err := os.MkdirAll(filepath.Join(venv, "bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			for _, f := range files {
				if err := os.WriteFile(filepath.Join(venv, "bin", f), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			t.Setenv(EnvVenv, venv)
			out := runVenv(t)
			if out.fatal == "" || out.skip != "" {
				t.Fatalf("Venv with %s=%s (%s) = fatal %q, skip %q: want a failure", EnvVenv, venv, name, out.fatal, out.skip)
			}
			if !strings.Contains(out.fatal, venv) || !strings.Contains(out.fatal, "make venv") {
				t.Errorf("failure %q does not name the virtualenv and the fix", out.fatal)
			}
		})
	}
}

// Nothing configured: skipped, with the way to enable the test.
func TestUnconfiguredVenvSkips(t *testing.T) {
	root := t.TempDir()
	venv, configured := locate(func(string) string { return "" }, root)
	if configured || venv != filepath.Join(root, ".venv") {
		t.Fatalf("locate with nothing set = %s, %v; want %s/.venv, not configured", venv, configured, root)
	}
	if _, configured := locate(func(k string) string { return map[string]string{"CI": "true"}[k] }, root); !configured {
		t.Error("with CI set the virtualenv must be required")
	}
	if err := os.Mkdir(filepath.Join(root, ".venv"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, configured := locate(func(string) string { return "" }, root); !configured {
		t.Error("an existing .venv at the repository root must be required to be complete")
	}
}

// The project's virtualenv, when there is one, passes.
func TestConfiguredVenvIsUsable(t *testing.T) {
	if os.Getenv(EnvVenv) == "" {
		t.Skipf("%s is not set", EnvVenv)
	}
	if out := runVenv(t); out.fatal != "" || out.skip != "" || out.venv != os.Getenv(EnvVenv) {
		t.Fatalf("Venv = %+v, want %s", out, os.Getenv(EnvVenv))
	}
}
