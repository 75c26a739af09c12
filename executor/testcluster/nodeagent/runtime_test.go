package nodeagent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fmgr.dev/internal/sdktest"
)

// TestTaskRuntime: the agent names the `a0` its Pods will run, the Python
// behind it and the SDK's version; without an a0 on PATH it says that
// every task will fail to start, and how to fix it.
func TestTaskRuntime(t *testing.T) {
	ctx := context.Background()
	venv := sdktest.Venv(t)
	bin := filepath.Join(venv, "bin")
	desc, ok := TaskRuntime(ctx, []string{"PATH=" + bin + ":/usr/bin:/bin"})
	// The virtualenv's python may be a symlink to the system's: the a0
	// script names it by the virtualenv's path.
	if !ok || !strings.HasPrefix(desc, "tasks run "+filepath.Join(bin, "a0")+" with "+bin+"/python") ||
		!strings.Contains(desc, "(Python 3.") || !strings.Contains(desc, ", flyte 2.") {
		t.Errorf("with the virtualenv on PATH: %v, %q", ok, desc)
	}

	empty := t.TempDir()
	desc, ok = TaskRuntime(ctx, []string{"PATH=" + empty})
	if ok || !strings.Contains(desc, "no `a0`") || !strings.Contains(desc, "PATH ("+empty+")") || !strings.Contains(desc, "executable file not found in $PATH") {
		t.Errorf("without a0 on PATH: %v, %q", ok, desc)
	}

	// An a0 that is not a Python script is named as it is.
	if err := os.WriteFile(filepath.Join(empty, "a0"), []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if desc, ok = TaskRuntime(ctx, []string{"PATH=" + empty}); !ok || !strings.Contains(desc, "with /bin/sh, which cannot report its flyte SDK") {
		t.Errorf("a shell a0: %v, %q", ok, desc)
	}
}
