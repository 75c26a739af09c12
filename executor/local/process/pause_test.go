package process

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// A paused attempt does nothing until it is resumed, then carries on where
// it was; an abort still ends a paused attempt.
func TestPauseStopsTheTreeAndResumeContinuesIt(t *testing.T) {
	r := testRunner()
	a := newAttempt(t)
	// The child counts into a file; the leader waits for it.
	p := start(t, r, a.spec(`(i=0; while true; do i=$((i+1)); echo $i > "$PWD/count"; sleep 0.05; done) & echo $! > "$PWD/child.pid"; wait`))
	child := readPid(t, filepath.Join(a.dir, "child.pid"))
	count := func() int {
		b, _ := os.ReadFile(filepath.Join(a.dir, "count"))
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	eventually(t, "the child to count", patience, func() bool { return count() > 0 })

	p.Pause()
	stopped := func(pid int) bool { st, err := readStat(pid); return err == nil && st.state == 'T' }
	eventually(t, "leader and child to stop", patience, func() bool { return stopped(p.Identity().PID) && stopped(child) })
	// Stopped processes stay stopped: the state is the kernel's word, no
	// sleep decides it.
	if !stopped(child) {
		t.Fatal("the child runs again without a Resume")
	}
	frozen := count()

	p.Resume()
	eventually(t, "the child to count on", patience, func() bool { return count() > frozen })

	p.Pause()
	eventually(t, "the child to stop again", patience, func() bool { return stopped(child) })
	p.Abort("aborted while paused")
	st := p.Wait()
	if !st.Aborted {
		t.Fatalf("status %+v", st)
	}
	eventually(t, "the tree to die", patience, func() bool { return !alive(child) })
	p.Pause() // after the end: no effect, no block
}
