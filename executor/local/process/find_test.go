package process

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"fmgr.dev/internal/testkit"
)

func TestFindInDir(t *testing.T) {
	r := testRunner()
	a := newAttempt(t)
	// A child that escapes the group but keeps the working directory, and
	// one that moves to another directory.
	p := start(t, r, a.spec(`setsid sleep 60 & echo $! > "$PWD/c1.pid"; (cd / && exec sleep 60) & echo $! > "$PWD/c2.pid"; mkdir sub; cd sub; exec sleep 60`))
	c1 := readPid(t, filepath.Join(a.dir, "c1.pid"))
	c2 := readPid(t, filepath.Join(a.dir, "c2.pid"))
	leader := p.Identity().PID

	var found []int
	testkit.Eventually(t, "the leader to enter sub/", patience, func() bool {
		// c2 is listed until it has moved to /.
		if cwd, _ := os.Readlink("/proc/" + strconv.Itoa(c2) + "/cwd"); cwd != "/" {
			return false
		}
		found = found[:0]
		for _, id := range FindInDir(a.dir) {
			found = append(found, id.PID)
			if id.StartTicks == 0 || id.BootID != bootID {
				t.Fatalf("identity %+v", id)
			}
		}
		return slices.Contains(found, leader) && slices.Contains(found, c1)
	})
	if slices.Contains(found, c2) {
		t.Errorf("found %v: %d works elsewhere", found, c2)
	}
	if got := FindInDir(a.dir + "x"); len(got) != 0 {
		t.Errorf("a sibling directory matched: %+v", got)
	}
	if got := FindInDir("/"); got != nil {
		t.Errorf("/ matched %+v", got)
	}
	// Killing what was found ends the escaped child too.
	for _, id := range FindInDir(a.dir) {
		if _, err := KillOrphan(id, patience); err != nil {
			t.Fatal(err)
		}
	}
	testkit.Eventually(t, "the found processes to die", patience, func() bool { return !alive(c1) && !alive(leader) })
	p.Wait() // the group's leftovers (c2) go with the leader
	testkit.Eventually(t, "the group to die", patience, func() bool { return !alive(c2) })
}
