package retention_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"fmgr.dev/internal/retention"
)

// The disk measure counts the attempt directories, not the executor's own
// dot-entries, and speaks up from 90% of the cap on.
func TestDiskNear(t *testing.T) {
	dir := t.TempDir()
	for p, n := range map[string]int{"_/p/development/r1/a0/1/attempt.log": 60, "_/p/development/r2/a0/1/work/out": 35, ".apps/app/log": 500} {
		f := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if got := retention.NewDisk(dir, 100).Near(); got != "" {
		t.Errorf("before any measure: %q", got)
	}
	for _, tc := range []struct {
		capBytes int64
		near     bool
	}{{100, true}, {105, true}, {106, false}, {0, false}} {
		d := retention.NewDisk(dir, tc.capBytes)
		if n := d.Measure(); n != 95 {
			t.Fatalf("measured %d bytes, want 95", n)
		}
		if got := d.Near(); (got != "") != tc.near || (tc.near && !strings.Contains(got, "retention.diskCap")) {
			t.Errorf("cap %d: Near() = %q, want near=%v", tc.capBytes, got, tc.near)
		}
	}
}
