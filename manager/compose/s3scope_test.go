package compose

import (
	"testing"
	"time"

	"fmgr.dev/internal/store"
)

// An attempt's key writes its run's base and reads its project/domain's
// runs, uploads and inputs; cache.crossProjectLookup widens the runs it
// reads to its org's; the key lives as long as the attempt may, plus a
// grace, or long without a limit.
func TestAttemptGrant(t *testing.T) {
	now := time.Unix(1_700_000_000, 0)
	a := &store.Action{ActionKey: store.RunKey{Project: "p", Domain: "development", RunName: "r1"}.Action("a0")}
	g := attemptGrant(a, "runs/_/p/development/r1", "custom/abc/inputs.pb", 10*time.Minute, false, now)
	want := []string{"runs/_/p/development", "uploads/_/p/development", "offloaded-inputs/_/p/development"}
	if len(g.Read) != len(want) || len(g.Write) != 1 || g.Write[0] != "runs/_/p/development/r1" || len(g.Files) != 1 || g.Files[0] != "custom/abc/inputs.pb" {
		t.Fatalf("grant %+v, want reads %q, the inputs file and the run's base written", g, want)
	}
	for i := range want {
		if g.Read[i] != want[i] {
			t.Errorf("read %d = %q, want %q", i, g.Read[i], want[i])
		}
	}
	if !g.Expires.Equal(now.Add(10*time.Minute + scopedKeyGrace)) {
		t.Errorf("expires %v, want the time limit and the grace", g.Expires)
	}
	if g := attemptGrant(a, "b", "", 0, true, now); g.Read[0] != "runs/_" || !g.Expires.Equal(now.Add(scopedKeyUnlimited)) {
		t.Errorf("cross-project grant %+v", g)
	}
}
