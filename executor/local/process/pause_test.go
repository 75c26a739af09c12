package process

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"fmgr.dev/internal/testkit"
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
	testkit.Eventually(t, "the child to count", patience, func() bool { return count() > 0 })

	p.Pause()
	stopped := func(pid int) bool { return isStopped(pid) }
	testkit.Eventually(t, "leader and child to stop", patience, func() bool { return stopped(p.Identity().PID) && stopped(child) })
	// Stopped processes stay stopped: the state is the kernel's word, no
	// sleep decides it.
	if !stopped(child) {
		t.Fatal("the child runs again without a Resume")
	}
	frozen := count()

	p.Resume()
	testkit.Eventually(t, "the child to count on", patience, func() bool { return count() > frozen })

	p.Pause()
	testkit.Eventually(t, "the child to stop again", patience, func() bool { return stopped(child) })
	p.Abort("aborted while paused")
	st := p.Wait()
	if !st.Aborted {
		t.Fatalf("status %+v", st)
	}
	testkit.Eventually(t, "the tree to die", patience, func() bool { return !alive(child) })
	p.Pause() // after the end: no effect, no block
}

// isStopped reports whether pid is stopped: in state T, or blocked in vfork
// (state D) on a child that is itself stopped — a shell that was starting a
// command when SIGSTOP arrived waits there until the child is continued.
func isStopped(pid int) bool {
	st, err := readStat(pid)
	if err != nil {
		return false
	}
	switch st.state {
	case 'T':
		return true
	case 'D':
		var kids, stoppedKids int
		forEachProc(func(p int, ps procStat) {
			if ps.ppid == pid {
				kids++
				if ps.state == 'T' {
					stoppedKids++
				}
			}
		})
		return kids > 0 && kids == stoppedKids
	}
	return false
}
