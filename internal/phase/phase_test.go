package phase

import (
	"slices"
	"testing"

	"fmgr.dev/gen/go/flyteidl2/common"
)

// TestMatchesWire pins every phase to flyteidl2.common.ActionPhase: same
// numbers, same names, none missing on either side.
func TestMatchesWire(t *testing.T) {
	for n, wire := range common.ActionPhase_name {
		p := FromProto(common.ActionPhase(n))
		if got := "ACTION_PHASE_" + p.String(); got != wire {
			t.Errorf("wire phase %d is %s, ours %s", n, wire, got)
		}
		if p.Proto() != common.ActionPhase(n) {
			t.Errorf("phase %s does not round-trip", p)
		}
	}
	for p := range names {
		if _, ok := common.ActionPhase_name[int32(p)]; !ok {
			t.Errorf("phase %s (%d) is not on the wire", p, int32(p))
		}
	}
}

func TestTerminal(t *testing.T) {
	want := []Phase{Succeeded, Failed, Aborted, TimedOut, Recovered}
	for p := range names {
		if got := p.Terminal(); got != slices.Contains(want, p) {
			t.Errorf("%s.Terminal() = %v", p, got)
		}
		if p.Terminal() && (p.Pending() || p.Active()) {
			t.Errorf("%s is terminal and still pending or active", p)
		}
	}
	if got := Terminals(); !slices.Equal(got, want) {
		t.Errorf("Terminals() = %v, want %v", got, want)
	}
	Terminals()[0] = Queued
	if !Succeeded.Terminal() || Queued.Terminal() {
		t.Error("changing the returned list changed the terminal phases")
	}
}
