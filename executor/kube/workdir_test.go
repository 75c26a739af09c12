package kube

import (
	"os"
	"path/filepath"
	"testing"

	"fmgr.dev/internal/dbtest"
	"fmgr.dev/internal/phase"
	"fmgr.dev/internal/runstate"
)

// With file:// storage shared with the Pods, a Pod works in a directory of
// its attempt on that storage: what the task writes there (and returns as a
// File or Dir, whose path the SDK keeps instead of uploading) outlives the
// Pod. A retry works in a directory of its own.
func TestPodWorksOnSharedStorage(t *testing.T) {
	h := newHarness(t, dbtest.SQLiteDSN(t))
	key := h.run("rworkdir", `echo "attempt $FLYTE_ATTEMPT_NUMBER" > made.txt; `+
		`if [ "$FLYTE_ATTEMPT_NUMBER" = 0 ]; then cp "$FIXTURES/recoverable.pb" "$2/error.pb"; exit 0; fi; `+succeed,
		taskOpts{retries: 1})
	a := h.terminal(key, phase.Succeeded)
	for n, want := range map[int32]string{1: "attempt 0\n", 2: "attempt 1\n"} {
		pod, err := h.pod(key, n)
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(runstate.OutputDir(a, n), podWorkDir)
		if got := pod.Spec.Containers[0].WorkingDir; got != dir {
			t.Errorf("attempt %d: the Pod's workingDir is %q, want %q on the shared storage", n, got, dir)
		}
		if b, err := os.ReadFile(filepath.Join(dir, "made.txt")); err != nil || string(b) != want {
			t.Errorf("attempt %d: the file the task wrote in its working directory reads %q (%v), want %q", n, b, err, want)
		}
	}
}
