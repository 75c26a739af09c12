package failpoint_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"fmgr.dev/internal/failpoint"
)

// TestMain lets the test binary act as the process a failpoint kills: with
// FAILPOINT_TEST_CHILD set it hits "other" once and "armed" five times,
// printing a line after each hit, and exits 0 if it is still alive.
func TestMain(m *testing.M) {
	if os.Getenv("FAILPOINT_TEST_CHILD") != "" {
		failpoint.Hit("other")
		for i := 1; i <= 5; i++ {
			failpoint.Hit("armed")
			fmt.Println("survived hit", i)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child runs the test binary as the child above with FLYTE_MANAGER_FAILPOINT
// set to armed and returns its stdout, its exit error and the mark file's
// content.
func child(t *testing.T, armed string) (string, error, string) {
	t.Helper()
	mark := filepath.Join(t.TempDir(), "mark")
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "FAILPOINT_TEST_CHILD=1", "FLYTE_MANAGER_FAILPOINT="+armed, "FLYTE_MANAGER_FAILPOINT_MARK="+mark)
	out, err := cmd.Output()
	data, rerr := os.ReadFile(mark)
	if rerr != nil && !errors.Is(rerr, os.ErrNotExist) {
		t.Fatal(rerr)
	}
	return string(out), err, string(data)
}

func killedBySIGKILL(err error) bool {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

func TestHitKillsOnTheArmedHit(t *testing.T) {
	out, err, mark := child(t, "armed@3")
	if !failpoint.Enabled {
		// A normal build ignores the variable entirely.
		if err != nil || strings.Count(out, "survived") != 5 || mark != "" {
			t.Fatalf("normal build: err %v, mark %q, output:\n%s", err, mark, out)
		}
		return
	}
	if !killedBySIGKILL(err) {
		t.Fatalf("child was not killed by SIGKILL: %v\n%s", err, out)
	}
	if want := "survived hit 1\nsurvived hit 2\n"; out != want {
		t.Fatalf("child output %q, want %q (killed on the third hit, not before)", out, want)
	}
	if !strings.HasPrefix(mark, "failpoint armed fired on hit 3 in pid ") {
		t.Fatalf("mark file = %q", mark)
	}
}

func TestHitDefaultsToTheFirstHit(t *testing.T) {
	if !failpoint.Enabled {
		t.Skip("needs -tags failpoints")
	}
	out, err, _ := child(t, "armed")
	if !killedBySIGKILL(err) || out != "" {
		t.Fatalf("want a SIGKILL on the first hit: %v, output %q", err, out)
	}
}

func TestHitIgnoresOtherNamesAndBadCounts(t *testing.T) {
	for _, armed := range []string{"", "nowhere", "armed@0", "armed@x"} {
		out, err, mark := child(t, armed)
		if err != nil || strings.Count(out, "survived") != 5 || mark != "" {
			t.Errorf("FLYTE_MANAGER_FAILPOINT=%q: err %v, mark %q, output %q", armed, err, mark, out)
		}
	}
}
